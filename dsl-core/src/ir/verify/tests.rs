//! Hand-built kernels, each breaking one rule, and the message the pass gives.

use super::*;
use crate::Target;
use crate::ir::{
    AccessTy, AluOp, BinaryOp, Block, CacheHint, CopyOp, ElemTy, LaunchBounds, MemOp, Operand,
    Param, SmemBuffer, Space, Tcgen05Op, UnaryOp, WgmmaOp,
};
use crate::target::{Capabilities, Capability};

struct Build {
    k: Kernel,
}

impl Build {
    fn new(target: Target) -> Self {
        Build {
            k: Kernel {
                name: "hand".into(),
                target,
                params: Vec::new(),
                regs: Vec::new(),
                body: Block::default(),
                stages: Vec::new(),
                launch: LaunchBounds {
                    threads: [128, 1, 1],
                    ..LaunchBounds::default()
                },
                smem_bytes: 0,
                smem_buffers: Vec::new(),
            },
        }
    }

    fn reg(&mut self, ty: Ty) -> Reg {
        self.k.regs.push(ty);
        Reg(self.k.regs.len() as u32 - 1)
    }

    /// A register of `ty` defined by a `mov` of zero.
    #[track_caller]
    fn def(&mut self, ty: Ty) -> Reg {
        let r = self.reg(ty);
        self.op(Op::Alu(AluOp::Mov {
            dst: r,
            src: Operand::Imm(0),
        }));
        r
    }

    #[track_caller]
    fn op(&mut self, op: Op) -> u32 {
        let loc = SourceLoc::caller();
        self.k.body.stmts.push(Stmt::Inst(Inst {
            op,
            loc,
            stage: None,
        }));
        loc.line
    }

    fn param(&mut self, name: &str, kind: ParamKind) -> u32 {
        self.k.params.push(Param {
            name: name.into(),
            kind,
        });
        self.k.params.len() as u32 - 1
    }

    fn violations(&self) -> Vec<Violation> {
        verify(&self.k)
            .err()
            .map(|e| e.violations)
            .unwrap_or_default()
    }

    /// The one violation, which must be at `line` of this file.
    fn one(&self, line: u32) -> String {
        let v = self.violations();
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!((v[0].loc.file, v[0].loc.line), (file!(), line), "{v:#?}");
        v[0].message.clone()
    }

    /// The one kernel-level violation.
    fn kernel_level(&self) -> String {
        let v = self.violations();
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!((v[0].op.as_str(), v[0].loc), ("kernel", KERNEL_LOC));
        v[0].message.clone()
    }
}

fn wgmma(b: &mut Build, n: u32, acc_regs: usize, acc_ty: Ty, trans_a: u8) -> u32 {
    let acc: Vec<_> = (0..acc_regs).map(|_| b.def(acc_ty)).collect();
    let d = b.def(Ty::U64);
    b.op(Op::Wgmma(WgmmaOp::MmaAsync {
        n,
        acc,
        a_desc: Operand::Reg(d),
        b_desc: Operand::Reg(d),
        scale_d: Operand::Imm(1),
        trans_a,
        trans_b: 0,
    }))
}

#[test]
fn a_traced_shape_passes() {
    let mut b = Build::new(Target::Sm90a);
    wgmma(&mut b, 64, 32, Ty::F32, 1);
    assert_eq!(b.violations(), vec![]);
}

#[test]
fn wgmma_shapes_accumulators_and_flags() {
    let mut b = Build::new(Target::Sm90a);
    let line = wgmma(&mut b, 12, 6, Ty::F32, 0);
    assert_eq!(
        b.one(line),
        "wgmma m64nNk16 takes N from 8 to 256 in steps of 8, got 12"
    );

    let mut b = Build::new(Target::Sm90a);
    let line = wgmma(&mut b, 64, 16, Ty::F32, 0);
    assert_eq!(
        b.one(line),
        "wgmma m64n64k16 accumulates into N/2 = 32 f32 registers a thread, got 16: make the \
         accumulator with `Accumulator::zeros(64)`"
    );

    let mut b = Build::new(Target::Sm90a);
    let line = wgmma(&mut b, 8, 4, Ty::F32, 2);
    assert_eq!(
        b.one(line),
        "transpose flags are 0 (K-major) or 1 (MN-major), got trans-a 2 and trans-b 0"
    );

    let mut b = Build::new(Target::Sm90a);
    wgmma(&mut b, 8, 4, Ty::U32, 0);
    assert_eq!(
        b.violations()[0].message,
        "an accumulator register is register #0 of type u32; it must be a f32"
    );
}

/// The RS form (A from registers) has the SS form's N and accumulator rules, a B-only
/// transpose flag, and four 32-bit A registers.
#[test]
fn wgmma_with_a_from_registers() {
    let rs = |b: &mut Build, n: u32, acc_regs: usize, a_ty: Ty, trans_b: u8| {
        let acc: Vec<_> = (0..acc_regs).map(|_| b.def(Ty::F32)).collect();
        let a = [(); 4].map(|_| b.def(a_ty));
        let d = b.def(Ty::U64);
        b.op(Op::Wgmma(WgmmaOp::MmaAsyncRs {
            n,
            acc,
            a,
            b_desc: Operand::Reg(d),
            scale_d: Operand::Imm(1),
            trans_b,
        }))
    };
    let mut b = Build::new(Target::Sm90a);
    rs(&mut b, 64, 32, Ty::B32, 1);
    assert_eq!(b.violations(), vec![]);

    let mut b = Build::new(Target::Sm90a);
    let line = rs(&mut b, 12, 6, Ty::B32, 0);
    assert_eq!(
        b.one(line),
        "wgmma m64nNk16 takes N from 8 to 256 in steps of 8, got 12"
    );

    let mut b = Build::new(Target::Sm90a);
    let line = rs(&mut b, 8, 4, Ty::B32, 2);
    assert_eq!(
        b.one(line),
        "transpose flags are 0 (K-major) or 1 (MN-major), got trans-a 0 and trans-b 2"
    );

    let mut b = Build::new(Target::Sm90a);
    rs(&mut b, 8, 4, Ty::U64, 0);
    assert_eq!(
        b.violations()[0].message,
        "an A fragment register is register #4 of type u64; it must be a 32-bit register"
    );
}

#[test]
fn tensor_memory_columns_and_load_widths() {
    let mut b = Build::new(Target::Sm100a);
    let slot = b.def(Ty::U32);
    let line = b.op(Op::Tcgen05(Tcgen05Op::Alloc {
        dst_smem: Operand::Reg(slot),
        ncols: 48,
    }));
    assert_eq!(
        b.one(line),
        "TMEM allocations are a power of two from 32 to 512 columns, got 48"
    );

    let mut b = Build::new(Target::Sm100a);
    let taddr = b.def(Ty::U32);
    let dst = vec![b.reg(Ty::U32), b.reg(Ty::U32), b.reg(Ty::U32)];
    let line = b.op(Op::Tcgen05(Tcgen05Op::Ld32x32b {
        dst,
        taddr: Operand::Reg(taddr),
    }));
    assert_eq!(
        b.one(line),
        "tcgen05.ld.32x32b loads 1, 2, 4, ... or 128 columns, not 3"
    );
}

#[test]
fn tensor_memory_store_widths_and_registers() {
    let mut b = Build::new(Target::Sm100a);
    let taddr = b.def(Ty::U32);
    let src = vec![b.def(Ty::U32), b.def(Ty::U32), b.def(Ty::U32)];
    let line = b.op(Op::Tcgen05(Tcgen05Op::St32x32b {
        src,
        taddr: Operand::Reg(taddr),
    }));
    assert_eq!(
        b.one(line),
        "tcgen05.st.32x32b stores 1, 2, 4, ... or 128 columns, not 3"
    );

    let mut b = Build::new(Target::Sm100a);
    let taddr = b.def(Ty::U32);
    let wide = b.def(Ty::U64);
    let line = b.op(Op::Tcgen05(Tcgen05Op::St32x32b {
        src: vec![wide],
        taddr: Operand::Reg(taddr),
    }));
    assert_eq!(
        b.one(line),
        "a source is register #1 of type u64; it must be a 32-bit register"
    );
}

#[test]
fn matrix_counts_registers_and_targets() {
    let mut b = Build::new(Target::Sm90a);
    let addr = b.def(Ty::U32);
    let dst = vec![b.reg(Ty::U32), b.reg(Ty::U32), b.reg(Ty::U32)];
    let line = b.op(Op::Mem(MemOp::LdMatrix {
        dst,
        addr: Operand::Reg(addr),
        trans: false,
    }));
    assert_eq!(
        b.one(line),
        "ldmatrix moves 1, 2 or 4 8x8 matrices (.x1, .x2, .x4), one b32 register each, not 3: \
         split it into such groups"
    );

    let mut b = Build::new(Target::Sm100a);
    let addr = b.def(Ty::U64);
    let src = b.def(Ty::U32);
    let line = b.op(Op::Mem(MemOp::StMatrix {
        src: vec![src],
        addr: Operand::Reg(addr),
        trans: true,
    }));
    assert_eq!(
        b.one(line),
        "the row address (a shared-memory address) is register #0 of type u64; it must be a \
         32-bit register"
    );

    for target in Target::ALL {
        for op in [
            Op::Mem(MemOp::LdMatrix {
                dst: vec![],
                addr: Operand::Imm(0),
                trans: false,
            }),
            Op::Mem(MemOp::StMatrix {
                src: vec![],
                addr: Operand::Imm(0),
                trans: false,
            }),
        ] {
            assert!(
                op.requirement().supports(target),
                "{} on {target}",
                op.name()
            );
        }
    }
}

#[test]
fn vector_widths() {
    let mut b = Build::new(Target::Sm90a);
    let addr = b.def(Ty::U32);
    let dst = vec![b.reg(Ty::U32), b.reg(Ty::U32), b.reg(Ty::U32)];
    let line = b.op(Op::Mem(MemOp::Ld {
        space: Space::Shared,
        ty: AccessTy::B32,
        dst,
        addr: Operand::Reg(addr),
        offset: 0,
        cache: CacheHint::Default,
        pred: None,
    }));
    assert_eq!(
        b.one(line),
        "vector accesses move 1, 2 or 4 elements, not 3: split it into such accesses"
    );

    let mut b = Build::new(Target::Sm90a);
    let addr = b.def(Ty::U32);
    let line = b.op(Op::Mem(MemOp::St {
        space: Space::Global,
        ty: AccessTy::B32,
        src: vec![Operand::Imm(0)],
        addr: Operand::Reg(addr),
        offset: 0,
        pred: None,
    }));
    assert_eq!(
        b.one(line),
        "the address (a global address) is register #0 of type u32; it must be a 64-bit \
         register"
    );
}

#[test]
fn barrier_ids_thread_counts_and_register_budgets() {
    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Sync(SyncOp::BarSync { id: 16 }));
    assert_eq!(b.one(line), "barrier id 16 is not in 0..16");

    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Sync(SyncOp::NamedBarrier {
        id: 0,
        threads: 64,
        wait: true,
    }));
    assert_eq!(
        b.one(line),
        "named barrier id 0: use 1..16 (0 is the CTA-wide barrier)"
    );

    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Sync(SyncOp::NamedBarrier {
        id: 1,
        threads: 48,
        wait: false,
    }));
    assert_eq!(
        b.one(line),
        "named barrier 1 for 48 threads: the count is a positive multiple of 32 (whole \
         warps), at most the CTA's 128"
    );

    let mut b = Build::new(Target::Sm90a);
    b.k.launch.max_regs = Some(128);
    let line = b.op(Op::Sync(SyncOp::SetMaxNreg {
        regs: 100,
        increase: true,
    }));
    assert_eq!(
        b.one(line),
        "setmaxnreg 100: the count is a multiple of 8 in 24..=256"
    );

    // The kernel-level rule: reported at the first setmaxnreg.
    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Sync(SyncOp::SetMaxNreg {
        regs: 40,
        increase: false,
    }));
    assert_eq!(
        b.one(line),
        "setmaxnreg needs a known register count at kernel entry: call `max_regs(..)` or \
         `min_ctas_per_sm(..)` before it (ptxas would ignore it, C7508)"
    );
}

/// A kernel with a rank-`rank` tensor map parameter and the map's address in a register.
fn with_map(rank: u8) -> (Build, Reg) {
    let mut b = Build::new(Target::Sm90a);
    let param = b.param(
        "map",
        ParamKind::TensorMap {
            elem: ElemTy::Bf16,
            rank,
        },
    );
    let map = b.reg(Ty::U64);
    b.op(Op::Mem(MemOp::ParamAddress { dst: map, param }));
    (b, map)
}

fn tensor_load(b: &mut Build, map: Reg, coords: usize) -> u32 {
    let smem = b.def(Ty::U32);
    b.op(Op::Copy(CopyOp::TensorLoad {
        dst: Operand::Reg(smem),
        map,
        coords: vec![Operand::Imm(0); coords],
        bar: Operand::Reg(smem),
        multicast: None,
    }))
}

#[test]
fn tma_coordinates_ranks_and_map_operands() {
    let (mut b, map) = with_map(2);
    tensor_load(&mut b, map, 2);
    assert_eq!(b.violations(), vec![]);

    let (mut b, map) = with_map(3);
    let line = tensor_load(&mut b, map, 2);
    assert_eq!(
        b.one(line),
        "2 coordinates for a rank-3 tensor map: give one per dimension"
    );

    let (mut b, map) = with_map(2);
    let line = tensor_load(&mut b, map, 6);
    assert_eq!(
        b.one(line),
        "6 coordinates: rank 6; TMA copies take rank 1 to 5"
    );

    // An address loaded from an ordinary parameter is not a tensor map.
    let mut b = Build::new(Target::Sm90a);
    b.param("p", ParamKind::Scalar(Ty::U64));
    let not_a_map = b.reg(Ty::U64);
    b.op(Op::Mem(MemOp::LdParam {
        dst: not_a_map,
        param: 0,
        offset: 0,
    }));
    let line = b.op(Op::Copy(CopyOp::PrefetchTensorMap { map: not_a_map }));
    assert_eq!(
        b.one(line),
        "the tensor map operand is register #0, which does not hold the address of a \
         tensor-map parameter: pass the `cvta.param` of a `TensorMap` parameter"
    );

    let mut b = Build::new(Target::Sm90a);
    b.param(
        "t",
        ParamKind::Tensor {
            elem: ElemTy::F32,
            rank: 1,
        },
    );
    let dst = b.reg(Ty::U64);
    let line = b.op(Op::Mem(MemOp::ParamAddress { dst, param: 0 }));
    assert_eq!(
        b.one(line),
        "parameter `t` is not a tensor map; only tensor maps are read through their \
         parameter-space address"
    );

    let mut b = Build::new(Target::Sm90a);
    b.param(
        "map",
        ParamKind::TensorMap {
            elem: ElemTy::Bf16,
            rank: 6,
        },
    );
    assert_eq!(
        b.kernel_level(),
        "tensor-map parameter `map` has rank 6; TMA copies take rank 1 to 5"
    );
}

#[test]
fn copy_sizes() {
    let mut b = Build::new(Target::Sm90a);
    let (s, g) = (b.def(Ty::U32), b.def(Ty::U64));
    let line = b.op(Op::Copy(CopyOp::CpAsync {
        dst: Operand::Reg(s),
        src: Operand::Reg(g),
        bytes: 12,
        src_bytes: None,
    }));
    assert_eq!(b.one(line), "cp.async copies 4, 8 or 16 bytes, not 12");

    let mut b = Build::new(Target::Sm90a);
    let (s, g) = (b.def(Ty::U32), b.def(Ty::U64));
    let line = b.op(Op::Copy(CopyOp::BulkLoad {
        dst: Operand::Reg(s),
        src: Operand::Reg(g),
        bytes: Operand::Imm(24),
        bar: Operand::Reg(s),
    }));
    assert_eq!(
        b.one(line),
        "a bulk copy moves a positive multiple of 16 bytes, not 24"
    );
}

#[test]
fn registers_are_defined_before_use_on_every_path() {
    // Read before any definition.
    let mut b = Build::new(Target::Sm90a);
    let x = b.reg(Ty::U32);
    let y = b.reg(Ty::U32);
    let line = b.op(Op::Alu(AluOp::Mov {
        dst: y,
        src: Operand::Reg(x),
    }));
    assert_eq!(
        b.one(line),
        "register #0 (u32) is read before it is defined on every path here: define it \
         earlier in this block or an enclosing one"
    );

    // Defined in one arm of an `If` only, read after it.
    let mut b = Build::new(Target::Sm90a);
    let p = b.def(Ty::Pred);
    let x = b.reg(Ty::U32);
    let set_x = Stmt::Inst(Inst {
        op: Op::Alu(AluOp::Mov {
            dst: x,
            src: Operand::Imm(1),
        }),
        loc: SourceLoc::caller(),
        stage: None,
    });
    b.k.body.stmts.push(Stmt::If {
        cond: p,
        then_body: Block {
            stmts: vec![set_x.clone()],
        },
        else_body: Block::default(),
        loc: SourceLoc::caller(),
    });
    let y = b.reg(Ty::U32);
    let mov_y = Op::Alu(AluOp::Mov {
        dst: y,
        src: Operand::Reg(x),
    });
    let line = b.op(mov_y.clone());
    assert!(b.one(line).starts_with("register #1 (u32) is read before"));
    // Defined in both arms (a merge): fine.
    let Stmt::If { else_body, .. } = &mut b.k.body.stmts[1] else {
        unreachable!()
    };
    else_body.stmts.push(set_x.clone());
    assert_eq!(b.violations(), vec![]);

    // Defined in a loop body only (it may run zero times), read after the loop.
    let mut b = Build::new(Target::Sm90a);
    let p = b.def(Ty::Pred);
    let x = b.reg(Ty::U32);
    b.k.body.stmts.push(Stmt::Loop {
        header: Block::default(),
        cond: p,
        body: Block { stmts: vec![set_x] },
        loc: SourceLoc::caller(),
    });
    let y = b.reg(Ty::U32);
    let line = b.op(Op::Alu(AluOp::Mov {
        dst: y,
        src: Operand::Reg(x),
    }));
    assert!(b.one(line).starts_with("register #1 (u32) is read before"));

    // A register outside the register file.
    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Sync(SyncOp::Elect { dst: Reg(7) }));
    assert_eq!(
        b.one(line),
        "register(s) #7 are not in the kernel's 0 registers"
    );

    // A branch on a non-predicate.
    let mut b = Build::new(Target::Sm90a);
    let c = b.def(Ty::U32);
    let loc = SourceLoc::caller();
    b.k.body.stmts.push(Stmt::If {
        cond: c,
        then_body: Block::default(),
        else_body: Block::default(),
        loc,
    });
    assert_eq!(
        b.one(loc.line),
        "condition register #0 is a u32; a branch tests a predicate (compare with `setp`)"
    );
}

#[test]
fn operand_types_match_the_op() {
    let mut b = Build::new(Target::Sm90a);
    let wide = b.def(Ty::U64);
    let dst = b.reg(Ty::U32);
    let line = b.op(Op::Alu(AluOp::Binary {
        op: BinaryOp::Add,
        ty: Ty::U32,
        dst,
        a: Operand::Reg(wide),
        b: Operand::Imm(1),
    }));
    assert_eq!(
        b.one(line),
        "operand a is register #0 of type u64; it must be a 32-bit register"
    );

    let mut b = Build::new(Target::Sm90a);
    let x = b.def(Ty::U32);
    let line = b.op(Op::Alu(AluOp::Unary {
        op: UnaryOp::Ex2Approx,
        ty: Ty::U32,
        dst: x,
        a: Operand::Reg(x),
    }));
    assert_eq!(b.one(line), "not defined on u32");

    let mut b = Build::new(Target::Sm90a);
    b.param("n", ParamKind::Scalar(Ty::U32));
    let dst = b.reg(Ty::U64);
    let line = b.op(Op::Mem(MemOp::LdParam {
        dst,
        param: 0,
        offset: 0,
    }));
    assert_eq!(b.one(line), "bytes [0, 8) of parameter `n` of 4 bytes");
}

#[test]
fn an_op_the_target_lacks_names_op_target_and_capability() {
    let mut b = Build::new(Target::Sm100a);
    let line = b.op(Op::Wgmma(WgmmaOp::Fence));
    assert_eq!(
        b.one(line),
        "`wgmma.fence` is not available on sm_100a: it needs sm_90a (Hopper); sm_100a lacks \
         wgmma"
    );
    let mut b = Build::new(Target::Sm90a);
    let line = b.op(Op::Tcgen05(Tcgen05Op::WaitLd));
    assert_eq!(
        b.one(line),
        "`tcgen05.wait::ld` is not available on sm_90a: it needs sm_100a (Blackwell); sm_90a \
         lacks tensor memory"
    );
}

#[test]
fn kernel_level_rules() {
    let mut b = Build::new(Target::Sm90a);
    b.k.launch.threads = [64, 32, 1];
    assert_eq!(
        b.kernel_level(),
        "block shape [64, 32, 1] has 2048 threads: every dimension is at least 1 and a CTA has \
         at most 1024 threads"
    );

    let mut b = Build::new(Target::Sm90a);
    b.k.launch.cluster = Some([5, 4, 1]);
    assert_eq!(
        b.kernel_level(),
        "cluster shape [5, 4, 1] has 20 CTAs: every dimension is at least 1 and a cluster has \
         at most 16 CTAs (8 portably)"
    );

    let mut b = Build::new(Target::Sm90a);
    b.k.launch.max_regs = Some(300);
    assert_eq!(
        b.kernel_level(),
        "max_regs(300): a thread has 24 to 255 registers"
    );

    let mut b = Build::new(Target::Sm90a);
    b.k.smem_bytes = 1024;
    b.k.smem_buffers.push(SmemBuffer {
        name: "tile".into(),
        offset: 512,
        bytes: 1024,
        align: 128,
        layout: None,
    });
    assert_eq!(
        b.kernel_level(),
        "shared-memory buffer `tile` spans bytes [512, 1536) but the kernel's dynamic shared \
         memory is 1024 bytes: raise `smem_bytes` to at least 1536"
    );

    let mut b = Build::new(Target::Sm100a);
    b.k.smem_bytes = 300 * 1024;
    assert_eq!(
        b.kernel_level(),
        "307200 bytes of dynamic shared memory; a CTA on sm_100a has at most 232448: use fewer \
         stages or smaller tiles"
    );
}

#[test]
fn every_violation_is_reported_and_both_back_ends_refuse() {
    let mut b = Build::new(Target::Sm100a);
    b.k.launch.threads = [2048, 1, 1];
    b.op(Op::Sync(SyncOp::BarSync { id: 20 }));
    b.op(Op::Wgmma(WgmmaOp::CommitGroup));
    let err = verify(&b.k).unwrap_err();
    assert_eq!(err.violations.len(), 3, "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(
            "kernel `hand` for sm_100a breaks 3 IR rule(s):\n  <kernel>:0:0: `kernel`"
        ),
        "{text}"
    );
    assert!(
        text.contains(": `bar.sync`: barrier id 20 is not in 0..16"),
        "{text}"
    );

    let emitted = crate::emit::ptx::emit(&b.k).unwrap_err();
    assert_eq!(emitted.to_string(), text);
    let interpreted = crate::interp::Program::compile(&b.k)
        .err()
        .expect("refused");
    assert_eq!(interpreted.to_string(), text);
}

/// A new target is a capability set: one with sm_100a's capabilities (as sm_103a has) runs
/// every op sm_100a runs, and lacks what sm_100a lacks, without any op family naming it.
#[test]
fn a_target_is_its_capability_set() {
    let sm103a: Capabilities = Target::Sm100a.capabilities();
    let tcgen05 = Op::Tcgen05(Tcgen05Op::WaitLd).requirement();
    assert!(tcgen05.missing(sm103a).is_empty());
    let wgmma = Op::Wgmma(WgmmaOp::Fence).requirement();
    assert_eq!(
        wgmma.missing(sm103a),
        Capabilities::of(&[Capability::Wgmma])
    );
    // A hypothetical Hopper without clusters loses multicast TMA but keeps plain TMA.
    let no_cluster = Target::Sm90a.capabilities().without(Capability::Cluster);
    let (mut b, map) = with_map(1);
    tensor_load(&mut b, map, 1);
    let Some(Stmt::Inst(load)) = b.k.body.stmts.last() else {
        unreachable!()
    };
    assert!(load.op.requirement().missing(no_cluster).is_empty());
    let Op::Copy(CopyOp::TensorLoad {
        dst,
        map,
        coords,
        bar,
        ..
    }) = load.op.clone()
    else {
        unreachable!()
    };
    let multicast = Op::Copy(CopyOp::TensorLoad {
        dst,
        map,
        coords,
        bar,
        multicast: Some(Operand::Imm(3)),
    });
    assert_eq!(
        multicast.requirement().missing(no_cluster).to_string(),
        "thread-block clusters"
    );
}
