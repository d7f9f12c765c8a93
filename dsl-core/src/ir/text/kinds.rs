//! The op kinds of the text form: one mnemonic per kind. [`OpKind::of`] matches every op of
//! the IR exhaustively, so a new op does not compile until it has a kind here; the printer
//! and the parser dispatch on the kind, and the filetests check that every kind in
//! [`OpKind::ALL`] is exercised.

use crate::ir::{
    AluOp, Bf16x2Arith, BinaryOp, ClusterOp, CopyOp, CvtOp, FenceKind, MbarrierOp, MemOp, Op,
    SyncOp, Tcgen05Op, UnaryOp, WgmmaOp,
};

macro_rules! op_kinds {
    ($($v:ident => $s:literal),* $(,)?) => {
        /// What an op line of the text form is, named by its mnemonic.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpKind {
            $($v),*
        }

        impl OpKind {
            /// Every kind, in the order of the IR's op families.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$v),*];

            /// The mnemonic that starts its op lines (`mbarrier.wait.parity`).
            pub fn mnemonic(self) -> &'static str {
                match self {
                    $(OpKind::$v => $s),*
                }
            }

            pub fn from_mnemonic(s: &str) -> Option<OpKind> {
                match s {
                    $($s => Some(OpKind::$v),)*
                    _ => None,
                }
            }
        }
    };
}

op_kinds! {
    Mov => "mov",
    Neg => "neg",
    Not => "not",
    Abs => "abs",
    Ex2Approx => "ex2.approx",
    Rcp => "rcp",
    Add => "add",
    Sub => "sub",
    Mul => "mul",
    MulHi => "mul.hi",
    Div => "div",
    Rem => "rem",
    Min => "min",
    Max => "max",
    And => "and",
    Or => "or",
    Xor => "xor",
    Shl => "shl",
    Shr => "shr",
    MulWide => "mul.wide",
    Fma => "fma",
    Setp => "setp",
    Selp => "selp",
    Convert => "cvt",
    BitCast => "bitcast",
    Pack => "pack",
    Unpack => "unpack",
    Prmt => "prmt",
    F32x2ToBf16x2 => "cvt.bf16x2.f32",
    F32x2ToE4m3x2 => "cvt.e4m3x2.f32",
    E4m3x2ToF16x2 => "cvt.f16x2.e4m3x2",
    E2m1x2ToF16x2 => "cvt.f16x2.e2m1x2",
    F32x2ToUe8m0x2 => "cvt.ue8m0x2.f32",
    Ue8m0x2ToBf16x2 => "cvt.bf16x2.ue8m0x2",
    F16ToF32 => "cvt.f32.f16",
    Bf16x2Mul => "mul.bf16x2",
    Bf16x2Fma => "fma.bf16x2",
    LdParam => "ld.param",
    CvtaGlobal => "cvta.global",
    SmemBase => "smem.base",
    ParamAddress => "cvta.param",
    Ld => "ld",
    St => "st",
    LdMatrix => "ldmatrix",
    StMatrix => "stmatrix",
    AtomAdd => "atom.add",
    CpAsync => "cp.async",
    CpAsyncCommit => "cp.async.commit_group",
    CpAsyncWait => "cp.async.wait_group",
    BulkLoad => "cp.async.bulk.load",
    TensorLoad => "tma.load",
    TensorStore => "tma.store",
    BulkCommit => "cp.async.bulk.commit_group",
    BulkWaitGroup => "cp.async.bulk.wait_group",
    PrefetchTensorMap => "prefetch.tensormap",
    BulkPrefetchL2 => "cp.async.bulk.prefetch.L2",
    StoreAsync => "st.async",
    ReadSpecial => "sreg",
    BarSync => "bar.sync",
    NamedBarSync => "bar.named.sync",
    NamedBarArrive => "bar.named.arrive",
    SetMaxNregInc => "setmaxnreg.inc",
    SetMaxNregDec => "setmaxnreg.dec",
    Shfl => "shfl",
    Ballot => "vote.ballot",
    Elect => "elect",
    FenceProxyAsync => "fence.proxy.async",
    FenceAcqRelCluster => "fence.acq_rel.cluster",
    FenceAcqRelGpu => "fence.acq_rel.gpu",
    FenceMbarrierInit => "fence.mbarrier_init",
    GridDepWait => "griddepcontrol.wait",
    GridDepLaunchDependents => "griddepcontrol.launch_dependents",
    MbarrierInit => "mbarrier.init",
    MbarrierArrive => "mbarrier.arrive",
    MbarrierArriveExpectTx => "mbarrier.arrive.expect_tx",
    MbarrierExpectTx => "mbarrier.expect_tx",
    MbarrierArriveCluster => "mbarrier.arrive.cluster",
    MbarrierWaitParity => "mbarrier.wait.parity",
    MbarrierWaitParityCluster => "mbarrier.wait.parity.cluster",
    ClusterArrive => "cluster.arrive",
    ClusterWait => "cluster.wait",
    Mapa => "mapa",
    TmemAlloc => "tcgen05.alloc",
    TmemRelinquish => "tcgen05.relinquish_alloc_permit",
    TmemDealloc => "tcgen05.dealloc",
    Tcgen05Mma => "tcgen05.mma",
    Tcgen05Commit => "tcgen05.commit",
    TmemLd => "tcgen05.ld.32x32b",
    TmemWaitLd => "tcgen05.wait.ld",
    TmemSt => "tcgen05.st.32x32b",
    TmemWaitSt => "tcgen05.wait.st",
    Tcgen05FenceBefore => "tcgen05.fence.before_thread_sync",
    Tcgen05FenceAfter => "tcgen05.fence.after_thread_sync",
    WgmmaFence => "wgmma.fence",
    WgmmaMma => "wgmma.mma_async",
    WgmmaMmaRs => "wgmma.mma_async.rs",
    WgmmaCommit => "wgmma.commit_group",
    WgmmaWait => "wgmma.wait_group",
}

impl OpKind {
    /// The kind of `op`.
    pub fn of(op: &Op) -> OpKind {
        match op {
            Op::Alu(op) => match op {
                AluOp::Mov { .. } => OpKind::Mov,
                AluOp::Unary { op, .. } => match op {
                    UnaryOp::Neg => OpKind::Neg,
                    UnaryOp::Not => OpKind::Not,
                    UnaryOp::Abs => OpKind::Abs,
                    UnaryOp::Ex2Approx => OpKind::Ex2Approx,
                    UnaryOp::Rcp => OpKind::Rcp,
                },
                AluOp::Binary { op, .. } => match op {
                    BinaryOp::Add => OpKind::Add,
                    BinaryOp::Sub => OpKind::Sub,
                    BinaryOp::Mul => OpKind::Mul,
                    BinaryOp::MulHi => OpKind::MulHi,
                    BinaryOp::Div => OpKind::Div,
                    BinaryOp::Rem => OpKind::Rem,
                    BinaryOp::Min => OpKind::Min,
                    BinaryOp::Max => OpKind::Max,
                    BinaryOp::And => OpKind::And,
                    BinaryOp::Or => OpKind::Or,
                    BinaryOp::Xor => OpKind::Xor,
                    BinaryOp::Shl => OpKind::Shl,
                    BinaryOp::Shr => OpKind::Shr,
                },
                AluOp::MulWide { .. } => OpKind::MulWide,
                AluOp::Fma { .. } => OpKind::Fma,
                AluOp::Setp { .. } => OpKind::Setp,
                AluOp::Selp { .. } => OpKind::Selp,
                AluOp::Convert { .. } => OpKind::Convert,
                AluOp::BitCast { .. } => OpKind::BitCast,
                AluOp::Pack { .. } => OpKind::Pack,
                AluOp::Unpack { .. } => OpKind::Unpack,
                AluOp::Prmt { .. } => OpKind::Prmt,
            },
            Op::Cvt(op) => match op {
                CvtOp::F32x2ToBf16x2 { .. } => OpKind::F32x2ToBf16x2,
                CvtOp::F32x2ToE4m3x2 { .. } => OpKind::F32x2ToE4m3x2,
                CvtOp::E4m3x2ToF16x2 { .. } => OpKind::E4m3x2ToF16x2,
                CvtOp::E2m1x2ToF16x2 { .. } => OpKind::E2m1x2ToF16x2,
                CvtOp::F32x2ToUe8m0x2 { .. } => OpKind::F32x2ToUe8m0x2,
                CvtOp::Ue8m0x2ToBf16x2 { .. } => OpKind::Ue8m0x2ToBf16x2,
                CvtOp::F16ToF32 { .. } => OpKind::F16ToF32,
                CvtOp::Bf16x2 { op, .. } => match op {
                    Bf16x2Arith::Mul => OpKind::Bf16x2Mul,
                    Bf16x2Arith::Fma => OpKind::Bf16x2Fma,
                },
            },
            Op::Mem(op) => match op {
                MemOp::LdParam { .. } => OpKind::LdParam,
                MemOp::CvtaGlobal { .. } => OpKind::CvtaGlobal,
                MemOp::SmemBase { .. } => OpKind::SmemBase,
                MemOp::ParamAddress { .. } => OpKind::ParamAddress,
                MemOp::Ld { .. } => OpKind::Ld,
                MemOp::St { .. } => OpKind::St,
                MemOp::LdMatrix { .. } => OpKind::LdMatrix,
                MemOp::StMatrix { .. } => OpKind::StMatrix,
                MemOp::AtomAdd { .. } => OpKind::AtomAdd,
            },
            Op::Copy(op) => match op {
                CopyOp::CpAsync { .. } => OpKind::CpAsync,
                CopyOp::CpAsyncCommit => OpKind::CpAsyncCommit,
                CopyOp::CpAsyncWait { .. } => OpKind::CpAsyncWait,
                CopyOp::BulkLoad { .. } => OpKind::BulkLoad,
                CopyOp::TensorLoad { .. } => OpKind::TensorLoad,
                CopyOp::TensorStore { .. } => OpKind::TensorStore,
                CopyOp::BulkCommit => OpKind::BulkCommit,
                CopyOp::BulkWaitGroup { .. } => OpKind::BulkWaitGroup,
                CopyOp::PrefetchTensorMap { .. } => OpKind::PrefetchTensorMap,
                CopyOp::BulkPrefetchL2 { .. } => OpKind::BulkPrefetchL2,
                CopyOp::StoreAsync { .. } => OpKind::StoreAsync,
            },
            Op::Sync(op) => match op {
                SyncOp::ReadSpecial { .. } => OpKind::ReadSpecial,
                SyncOp::BarSync { .. } => OpKind::BarSync,
                SyncOp::NamedBarrier { wait: true, .. } => OpKind::NamedBarSync,
                SyncOp::NamedBarrier { wait: false, .. } => OpKind::NamedBarArrive,
                SyncOp::SetMaxNreg { increase: true, .. } => OpKind::SetMaxNregInc,
                SyncOp::SetMaxNreg {
                    increase: false, ..
                } => OpKind::SetMaxNregDec,
                SyncOp::Shfl { .. } => OpKind::Shfl,
                SyncOp::Ballot { .. } => OpKind::Ballot,
                SyncOp::Elect { .. } => OpKind::Elect,
                SyncOp::Fence(kind) => match kind {
                    FenceKind::ProxyAsyncSharedCta => OpKind::FenceProxyAsync,
                    FenceKind::AcqRelCluster => OpKind::FenceAcqRelCluster,
                    FenceKind::AcqRelGpu => OpKind::FenceAcqRelGpu,
                    FenceKind::MbarrierInit => OpKind::FenceMbarrierInit,
                },
                SyncOp::GridDepWait => OpKind::GridDepWait,
                SyncOp::GridDepLaunchDependents => OpKind::GridDepLaunchDependents,
            },
            Op::Mbarrier(op) => match op {
                MbarrierOp::Init { .. } => OpKind::MbarrierInit,
                MbarrierOp::Arrive { .. } => OpKind::MbarrierArrive,
                MbarrierOp::ArriveExpectTx { .. } => OpKind::MbarrierArriveExpectTx,
                MbarrierOp::ExpectTx { .. } => OpKind::MbarrierExpectTx,
                MbarrierOp::ArriveCluster { .. } => OpKind::MbarrierArriveCluster,
                MbarrierOp::WaitParity { .. } => OpKind::MbarrierWaitParity,
                MbarrierOp::WaitParityCluster { .. } => OpKind::MbarrierWaitParityCluster,
            },
            Op::Cluster(op) => match op {
                ClusterOp::Arrive { .. } => OpKind::ClusterArrive,
                ClusterOp::Wait => OpKind::ClusterWait,
                ClusterOp::Mapa { .. } => OpKind::Mapa,
            },
            Op::Tcgen05(op) => match op {
                Tcgen05Op::Alloc { .. } => OpKind::TmemAlloc,
                Tcgen05Op::RelinquishAllocPermit => OpKind::TmemRelinquish,
                Tcgen05Op::Dealloc { .. } => OpKind::TmemDealloc,
                Tcgen05Op::Mma { .. } => OpKind::Tcgen05Mma,
                Tcgen05Op::Commit { .. } => OpKind::Tcgen05Commit,
                Tcgen05Op::Ld32x32b { .. } => OpKind::TmemLd,
                Tcgen05Op::WaitLd => OpKind::TmemWaitLd,
                Tcgen05Op::St32x32b { .. } => OpKind::TmemSt,
                Tcgen05Op::WaitSt => OpKind::TmemWaitSt,
                Tcgen05Op::FenceBeforeThreadSync => OpKind::Tcgen05FenceBefore,
                Tcgen05Op::FenceAfterThreadSync => OpKind::Tcgen05FenceAfter,
            },
            Op::Wgmma(op) => match op {
                WgmmaOp::Fence => OpKind::WgmmaFence,
                WgmmaOp::MmaAsync { .. } => OpKind::WgmmaMma,
                WgmmaOp::MmaAsyncRs { .. } => OpKind::WgmmaMmaRs,
                WgmmaOp::CommitGroup => OpKind::WgmmaCommit,
                WgmmaOp::WaitGroup { .. } => OpKind::WgmmaWait,
            },
        }
    }
}
