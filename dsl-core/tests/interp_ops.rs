//! Every ALU and conversion op of the IR, run by the interpreter against hand values and
//! the edge cases of the PTX rules (NaN, infinities, -0, subnormals, saturation, ties).
//!
//! Each case builds a one-op kernel directly in IR: thread i loads its operands from row i
//! of an input buffer (8 bytes per operand), runs the op and stores the result.

use dsl_core::Target;
use dsl_core::interp::{Arg, Launch, Memory, run};
use dsl_core::ir::{
    AccessTy, AluOp, Bf16x2Arith, BinaryOp, Block, CacheHint, CmpOp, CvtOp, ElemTy, Inst, Kernel,
    LaunchBounds, MemOp, Op, Operand, Param, ParamKind, Reg, Rounding, ShflMode, SourceLoc, Space,
    SpecialReg, Stmt, SyncOp, Ty, UnaryOp,
};

struct Ir {
    regs: Vec<Ty>,
    stmts: Vec<Stmt>,
}

impl Ir {
    fn reg(&mut self, ty: Ty) -> Reg {
        self.regs.push(ty);
        Reg(self.regs.len() as u32 - 1)
    }

    fn push(&mut self, op: Op) {
        self.stmts.push(Stmt::Inst(Inst {
            op,
            loc: SourceLoc::caller(),
            stage: None,
        }));
    }
}

fn access(ty: Ty) -> AccessTy {
    match ty.bits() {
        16 => AccessTy::U16,
        64 => AccessTy::B64,
        _ => AccessTy::B32,
    }
}

/// Runs `make(dst, srcs)` once per row of `inputs` (one thread per row) and returns the
/// result bits of each row.
fn eval(srcs: &[Ty], dst: Ty, inputs: &[Vec<u64>], make: impl Fn(Reg, &[Reg]) -> Op) -> Vec<u64> {
    assert!(inputs.len() <= 1024 && inputs.iter().all(|r| r.len() == srcs.len()));
    let n = inputs.len().next_multiple_of(32);
    let mut ir = Ir {
        regs: Vec::new(),
        stmts: Vec::new(),
    };
    let tid = ir.reg(Ty::U32);
    ir.push(Op::Sync(SyncOp::ReadSpecial {
        dst: tid,
        reg: SpecialReg::TidX,
    }));
    let (inp, out) = (ir.reg(Ty::U64), ir.reg(Ty::U64));
    for (dst, param) in [(inp, 0), (out, 1)] {
        ir.push(Op::Mem(MemOp::LdParam {
            dst,
            param,
            offset: 0,
        }));
    }
    let off = ir.reg(Ty::U64);
    ir.push(Op::Alu(AluOp::MulWide {
        ty: Ty::U32,
        dst: off,
        a: Operand::Reg(tid),
        b: Operand::Imm(8 * srcs.len().max(1) as u64),
    }));
    let base = ir.reg(Ty::U64);
    ir.push(Op::Alu(AluOp::Binary {
        op: BinaryOp::Add,
        ty: Ty::U64,
        dst: base,
        a: Operand::Reg(inp),
        b: Operand::Reg(off),
    }));
    let mut src_regs = Vec::new();
    for (j, &ty) in srcs.iter().enumerate() {
        let load_ty = if ty == Ty::Pred { Ty::U32 } else { ty };
        let r = ir.reg(load_ty);
        ir.push(Op::Mem(MemOp::Ld {
            space: Space::Global,
            ty: access(load_ty),
            dst: vec![r],
            addr: Operand::Reg(base),
            offset: 8 * j as i32,
            cache: CacheHint::Default,
            pred: None,
        }));
        if ty == Ty::Pred {
            let p = ir.reg(Ty::Pred);
            ir.push(Op::Alu(AluOp::Setp {
                cmp: CmpOp::Ne,
                ty: Ty::U32,
                dst: p,
                a: Operand::Reg(r),
                b: Operand::Imm(0),
            }));
            src_regs.push(p);
        } else {
            src_regs.push(r);
        }
    }
    let d = ir.reg(dst);
    // A second register of the destination's type, `Reg(d.0 + 1)`, for ops with two results.
    ir.reg(dst);
    let op = make(d, &src_regs);
    ir.push(op);
    let stored = if dst == Ty::Pred {
        let v = ir.reg(Ty::U32);
        ir.push(Op::Alu(AluOp::Selp {
            ty: Ty::U32,
            dst: v,
            a: Operand::Imm(1),
            b: Operand::Imm(0),
            cond: d,
        }));
        v
    } else {
        d
    };
    let ooff = ir.reg(Ty::U64);
    ir.push(Op::Alu(AluOp::MulWide {
        ty: Ty::U32,
        dst: ooff,
        a: Operand::Reg(tid),
        b: Operand::Imm(8),
    }));
    let oaddr = ir.reg(Ty::U64);
    ir.push(Op::Alu(AluOp::Binary {
        op: BinaryOp::Add,
        ty: Ty::U64,
        dst: oaddr,
        a: Operand::Reg(out),
        b: Operand::Reg(ooff),
    }));
    ir.push(Op::Mem(MemOp::St {
        space: Space::Global,
        ty: access(ir.regs[stored.index()]),
        src: vec![Operand::Reg(stored)],
        addr: Operand::Reg(oaddr),
        offset: 0,
        pred: None,
    }));
    let tensor = ParamKind::Tensor {
        elem: ElemTy::U8,
        rank: 1,
    };
    let kernel = Kernel {
        name: "one_op".into(),
        target: Target::Sm100a,
        params: vec![
            Param {
                name: "inp".into(),
                kind: tensor,
            },
            Param {
                name: "out".into(),
                kind: tensor,
            },
        ],
        regs: ir.regs,
        body: Block { stmts: ir.stmts },
        stages: Vec::new(),
        launch: LaunchBounds {
            threads: [n as u32, 1, 1],
            ..LaunchBounds::default()
        },
        smem_bytes: 0,
        smem_buffers: Vec::new(),
    };
    let mut mem = Memory::new();
    let mut flat: Vec<u64> = Vec::new();
    for i in 0..n {
        let row = &inputs[i.min(inputs.len() - 1)];
        flat.extend(row);
        if srcs.is_empty() {
            flat.push(0);
        }
    }
    let inp = mem.alloc_from("inp", &flat);
    let out = mem.alloc("out", 8 * n);
    let len = |id| mem.len(id) as i64;
    let args = [
        Arg::contiguous(inp, &[len(inp)]),
        Arg::contiguous(out, &[len(out)]),
    ];
    run(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    mem.read::<u64>(out)[..inputs.len()].to_vec()
}

fn reg_op(o: Reg) -> Operand {
    Operand::Reg(o)
}

fn binary(op: BinaryOp, ty: Ty, cases: &[(u64, u64, u64)]) {
    let b_ty = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        Ty::U32
    } else {
        ty
    };
    let inputs: Vec<Vec<u64>> = cases.iter().map(|&(a, b, _)| vec![a, b]).collect();
    let got = eval(&[ty, b_ty], ty, &inputs, |dst, s| {
        Op::Alu(AluOp::Binary {
            op,
            ty,
            dst,
            a: reg_op(s[0]),
            b: reg_op(s[1]),
        })
    });
    for (i, &(a, b, want)) in cases.iter().enumerate() {
        assert_eq!(
            got[i], want,
            "{op:?}.{ty:?}({a:#x}, {b:#x}) = {:#x}, want {want:#x}",
            got[i]
        );
    }
}

fn unary(op: UnaryOp, ty: Ty, cases: &[(u64, u64)]) {
    let inputs: Vec<Vec<u64>> = cases.iter().map(|&(a, _)| vec![a]).collect();
    let got = eval(&[ty], ty, &inputs, |dst, s| {
        Op::Alu(AluOp::Unary {
            op,
            ty,
            dst,
            a: reg_op(s[0]),
        })
    });
    for (i, &(a, want)) in cases.iter().enumerate() {
        assert_eq!(
            got[i], want,
            "{op:?}.{ty:?}({a:#x}) = {:#x}, want {want:#x}",
            got[i]
        );
    }
}

fn f(x: f32) -> u64 {
    x.to_bits() as u64
}

fn u(x: i32) -> u64 {
    x as u32 as u64
}

const NAN: u64 = 0x7fff_ffff;

#[test]
fn integer_arithmetic_wraps() {
    binary(
        BinaryOp::Add,
        Ty::S32,
        &[
            (u(i32::MAX), 1, u(i32::MIN)),
            (u(-5), 3, u(-2)),
            (0xffff_ffff, 1, 0),
        ],
    );
    binary(BinaryOp::Sub, Ty::U32, &[(0, 1, 0xffff_ffff), (10, 3, 7)]);
    binary(
        BinaryOp::Mul,
        Ty::S32,
        &[(u(0x10000), u(0x10000), 0), (u(-3), 7, u(-21))],
    );
    binary(
        BinaryOp::Add,
        Ty::U64,
        &[(u64::MAX, 2, 1), (1 << 40, 1 << 40, 1 << 41)],
    );
    binary(
        BinaryOp::MulHi,
        Ty::U32,
        &[(0xffff_ffff, 0xffff_ffff, 0xffff_fffe), (1 << 31, 4, 2)],
    );
    binary(
        BinaryOp::MulHi,
        Ty::S32,
        &[
            (u(-1), u(-1), 0),
            (u(i32::MIN), 2, u(-1)),
            (u(-4), 1 << 30, u(-1)),
        ],
    );
    binary(
        BinaryOp::MulHi,
        Ty::S64,
        &[((-1i64) as u64, 2, u64::MAX), (1 << 63, 1 << 63, 1 << 62)],
    );
    // mul.wide: the full product of two 32-bit values.
    let got = eval(
        &[Ty::S32, Ty::S32],
        Ty::S64,
        &[vec![u(-3), u(i32::MAX)]],
        |dst, s| {
            Op::Alu(AluOp::MulWide {
                ty: Ty::S32,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
            })
        },
    );
    assert_eq!(got[0] as i64, -3 * i32::MAX as i64);
    let got = eval(
        &[Ty::U32, Ty::U32],
        Ty::U64,
        &[vec![0xffff_ffff, 0xffff_ffff]],
        |dst, s| {
            Op::Alu(AluOp::MulWide {
                ty: Ty::U32,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
            })
        },
    );
    assert_eq!(got[0], 0xffff_fffe_0000_0001);
    // mad.lo wraps too.
    let got = eval(
        &[Ty::U32, Ty::U32, Ty::U32],
        Ty::U32,
        &[vec![0x10000, 0x10000, 5]],
        |dst, s| {
            Op::Alu(AluOp::Fma {
                ty: Ty::U32,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
                c: reg_op(s[2]),
            })
        },
    );
    assert_eq!(got[0], 5);
}

#[test]
fn integer_division_truncates() {
    binary(
        BinaryOp::Div,
        Ty::S32,
        &[
            (u(7), u(2), 3),
            (u(-7), u(2), u(-3)),
            (u(7), u(-2), u(-3)),
            (u(i32::MIN), u(-1), u(i32::MIN)),
        ],
    );
    binary(
        BinaryOp::Rem,
        Ty::S32,
        &[
            (u(-7), u(2), u(-1)),
            (u(7), u(-2), 1),
            (u(i32::MIN), u(-1), 0),
        ],
    );
    binary(
        BinaryOp::Div,
        Ty::U32,
        &[(0xffff_fff9, 2, 0x7fff_fffc), (5, 7, 0)],
    );
    binary(BinaryOp::Rem, Ty::U64, &[(u64::MAX, 10, 5)]);
    binary(
        BinaryOp::Div,
        Ty::S64,
        &[((-9i64) as u64, 4, (-2i64) as u64)],
    );
}

#[test]
fn min_max_follow_signedness() {
    binary(BinaryOp::Min, Ty::S32, &[(u(-1), 1, u(-1)), (5, 3, 3)]);
    binary(BinaryOp::Min, Ty::U32, &[(u(-1), 1, 1)]);
    binary(BinaryOp::Max, Ty::S32, &[(u(-1), 1, 1)]);
    binary(BinaryOp::Max, Ty::U32, &[(u(-1), 1, 0xffff_ffff)]);
    binary(BinaryOp::Max, Ty::S64, &[((-1i64) as u64, 0, 0)]);
}

#[test]
fn shifts_clamp_to_the_register_width() {
    // PTX: shift amounts greater than the register width are clamped to the width.
    binary(
        BinaryOp::Shl,
        Ty::U32,
        &[
            (1, 31, 1 << 31),
            (1, 32, 0),
            (0xffff_ffff, 33, 0),
            (3, 0xffff_ffff, 0),
            (3, 1, 6),
        ],
    );
    binary(
        BinaryOp::Shr,
        Ty::U32,
        &[
            (1 << 31, 31, 1),
            (0xffff_ffff, 32, 0),
            (0xffff_ffff, 100, 0),
        ],
    );
    binary(
        BinaryOp::Shr,
        Ty::S32,
        &[
            (u(-8), 1, u(-4)),
            (u(-8), 40, u(-1)),
            (u(8), 40, 0),
            (u(i32::MIN), 31, u(-1)),
        ],
    );
    binary(
        BinaryOp::Shl,
        Ty::U64,
        &[(1, 63, 1 << 63), (1, 64, 0), (5, 200, 0)],
    );
    binary(
        BinaryOp::Shr,
        Ty::S64,
        &[(1 << 63, 63, u64::MAX), (1 << 63, 64, u64::MAX), (4, 1, 2)],
    );
}

#[test]
fn bitwise_and_predicate_logic() {
    binary(BinaryOp::And, Ty::U32, &[(0xf0f0, 0xff00, 0xf000)]);
    binary(BinaryOp::Or, Ty::U64, &[(1 << 40, 1, (1 << 40) | 1)]);
    binary(BinaryOp::Xor, Ty::S32, &[(u(-1), 0xff, 0xffff_ff00)]);
    binary(BinaryOp::Xor, Ty::Pred, &[(1, 1, 0), (1, 0, 1)]);
    binary(BinaryOp::And, Ty::Pred, &[(1, 0, 0), (1, 1, 1)]);
    unary(
        UnaryOp::Not,
        Ty::U32,
        &[(0, 0xffff_ffff), (0xffff_0000, 0xffff)],
    );
    unary(UnaryOp::Not, Ty::U64, &[(0, u64::MAX)]);
    unary(UnaryOp::Not, Ty::Pred, &[(0, 1), (1, 0)]);
    unary(
        UnaryOp::Neg,
        Ty::S32,
        &[(5, u(-5)), (u(i32::MIN), u(i32::MIN))],
    );
    unary(
        UnaryOp::Abs,
        Ty::S32,
        &[(u(-5), 5), (u(i32::MIN), u(i32::MIN))],
    );
    unary(UnaryOp::Neg, Ty::S64, &[(1, u64::MAX)]);
}

#[test]
fn f32_arithmetic_rounds_to_nearest_even() {
    let one = 1.0f32;
    let ulp = f32::EPSILON; // 2^-23
    binary(
        BinaryOp::Add,
        Ty::F32,
        &[
            // 1 + 2^-24 is a tie: it rounds to the even 1.0.
            (f(one), f(ulp / 2.0), f(one)),
            // 1 + 3 * 2^-24 is a tie between 1 + 2^-23 and 1 + 2^-22: even is 1 + 2^-22.
            (f(one), f(1.5 * ulp), f(one + 2.0 * ulp)),
            (f(f32::INFINITY), f(f32::NEG_INFINITY), NAN),
            (f(-0.0), f(-0.0), f(-0.0)),
            (f(0.0), f(-0.0), f(0.0)),
            // NaN payloads are not kept: the canonical NaN comes out.
            (0x7fc0_1234, f(1.0), NAN),
        ],
    );
    binary(
        BinaryOp::Sub,
        Ty::F32,
        &[
            (f(1.0), f(1.0), f(0.0)),
            (f(f32::MAX), f(-f32::MAX), f(f32::INFINITY)),
        ],
    );
    binary(
        BinaryOp::Mul,
        Ty::F32,
        &[
            // Subnormal results are kept (mul.rn.f32 has no .ftz).
            (f(f32::MIN_POSITIVE), f(0.5), 0x0040_0000),
            (f(0.0), f(f32::INFINITY), NAN),
            (f(-2.0), f(0.0), f(-0.0)),
        ],
    );
    binary(
        BinaryOp::Div,
        Ty::F32,
        &[
            (f(1.0), f(3.0), 0x3eaa_aaab),
            (f(1.0), f(0.0), f(f32::INFINITY)),
            (f(-1.0), f(0.0), f(f32::NEG_INFINITY)),
            (f(0.0), f(0.0), NAN),
        ],
    );
    unary(
        UnaryOp::Rcp,
        Ty::F32,
        &[
            (f(3.0), 0x3eaa_aaab),
            (f(0.0), f(f32::INFINITY)),
            (f(-0.0), f(f32::NEG_INFINITY)),
            (f(f32::INFINITY), f(0.0)),
            // 1 / 2^-149 overflows.
            (1, f(f32::INFINITY)),
        ],
    );
    // neg and abs only touch the sign bit.
    unary(
        UnaryOp::Neg,
        Ty::F32,
        &[
            (f(0.0), f(-0.0)),
            (f(1.5), f(-1.5)),
            (0x7fc0_0001, 0xffc0_0001),
        ],
    );
    unary(
        UnaryOp::Abs,
        Ty::F32,
        &[(f(-0.0), f(0.0)), (f(-2.0), f(2.0))],
    );
}

#[test]
fn fma_rounds_once() {
    let a = 1.0 + 2f32.powi(-12);
    let b = 1.0 - 2f32.powi(-12);
    let cases = [
        // a * b = 1 - 2^-24 exactly; minus 1 is -2^-24. Rounding the product first gives 0.
        (a, b, -1.0, -(2f32.powi(-24))),
        (2.0, 3.0, 1.0, 7.0),
        (f32::INFINITY, 0.0, 1.0, f32::NAN),
        (-0.0, 1.0, -0.0, -0.0),
        (f32::MAX, 2.0, -f32::MAX, f32::MAX),
        (2f32.powi(-100), 2f32.powi(-49), 0.0, 2f32.powi(-149)),
    ];
    let inputs: Vec<Vec<u64>> = cases.iter().map(|c| vec![f(c.0), f(c.1), f(c.2)]).collect();
    let got = eval(&[Ty::F32; 3], Ty::F32, &inputs, |dst, s| {
        Op::Alu(AluOp::Fma {
            ty: Ty::F32,
            dst,
            a: reg_op(s[0]),
            b: reg_op(s[1]),
            c: reg_op(s[2]),
        })
    });
    for (i, c) in cases.iter().enumerate() {
        let want = if c.3.is_nan() { NAN } else { f(c.3) };
        assert_eq!(got[i], want, "fma{c:?}");
    }
    // Against the platform's correctly rounded fma on awkward operands.
    let mut x = 0x1234_5678u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Mostly moderate exponents, so that products and sums interact.
        f32::from_bits((x & 0x807f_ffff) | ((0x70 + (x >> 24) % 0x20) << 23))
    };
    let cases: Vec<[f32; 3]> = (0..1024).map(|_| [next(), next(), -next()]).collect();
    let inputs: Vec<Vec<u64>> = cases
        .iter()
        .map(|c| c.iter().map(|&v| f(v)).collect())
        .collect();
    let got = eval(&[Ty::F32; 3], Ty::F32, &inputs, |dst, s| {
        Op::Alu(AluOp::Fma {
            ty: Ty::F32,
            dst,
            a: reg_op(s[0]),
            b: reg_op(s[1]),
            c: reg_op(s[2]),
        })
    });
    for (c, g) in cases.iter().zip(&got) {
        assert_eq!(*g, f(c[0].mul_add(c[1], c[2])), "fma{c:?}");
    }
}

#[test]
fn f32_min_max_take_the_number_over_nan() {
    let cases = [
        (f(f32::NAN), f(1.0), f(1.0), f(1.0)),
        (f(2.0), 0x7fc0_0001, f(2.0), f(2.0)),
        (f(f32::NAN), f(f32::NAN), NAN, NAN),
        // -0.0 < +0.0 for min and max (PTX min_num/max_num).
        (f(-0.0), f(0.0), f(-0.0), f(0.0)),
        (f(0.0), f(-0.0), f(-0.0), f(0.0)),
        (f(-1.0), f(f32::NEG_INFINITY), f(f32::NEG_INFINITY), f(-1.0)),
    ];
    binary(
        BinaryOp::Min,
        Ty::F32,
        &cases.map(|(a, b, min, _)| (a, b, min)),
    );
    binary(
        BinaryOp::Max,
        Ty::F32,
        &cases.map(|(a, b, _, max)| (a, b, max)),
    );
}

fn setp(cmp: CmpOp, ty: Ty, cases: &[(u64, u64, bool)]) {
    let inputs: Vec<Vec<u64>> = cases.iter().map(|&(a, b, _)| vec![a, b]).collect();
    let got = eval(&[ty, ty], Ty::Pred, &inputs, |dst, s| {
        Op::Alu(AluOp::Setp {
            cmp,
            ty,
            dst,
            a: reg_op(s[0]),
            b: reg_op(s[1]),
        })
    });
    for (i, &(a, b, want)) in cases.iter().enumerate() {
        assert_eq!(got[i] != 0, want, "setp.{cmp:?}.{ty:?}({a:#x}, {b:#x})");
    }
}

#[test]
fn setp_is_ordered_except_ne() {
    let nan = f(f32::NAN);
    setp(
        CmpOp::Lt,
        Ty::F32,
        &[
            (nan, f(1.0), false),
            (f(-0.0), f(0.0), false),
            (f(1.0), f(2.0), true),
        ],
    );
    setp(
        CmpOp::Eq,
        Ty::F32,
        &[(nan, nan, false), (f(-0.0), f(0.0), true)],
    );
    // Ne prints as setp.neu: unordered, so true when either side is NaN.
    setp(
        CmpOp::Ne,
        Ty::F32,
        &[
            (nan, nan, true),
            (nan, f(1.0), true),
            (f(1.0), f(1.0), false),
        ],
    );
    setp(
        CmpOp::Ge,
        Ty::F32,
        &[(nan, f(1.0), false), (f(f32::INFINITY), f(f32::MAX), true)],
    );
    setp(CmpOp::Lt, Ty::S32, &[(u(-1), 1, true)]);
    setp(CmpOp::Lt, Ty::U32, &[(u(-1), 1, false)]);
    setp(CmpOp::Le, Ty::S64, &[((-1i64) as u64, 0, true)]);
    setp(CmpOp::Gt, Ty::U64, &[(u64::MAX, 0, true)]);
}

fn convert(from: Ty, to: Ty, rounding: Rounding, cases: &[(u64, u64)]) {
    let inputs: Vec<Vec<u64>> = cases.iter().map(|&(a, _)| vec![a]).collect();
    let got = eval(&[from], to, &inputs, |dst, s| {
        Op::Alu(AluOp::Convert {
            dst_ty: to,
            src_ty: from,
            rounding,
            dst,
            src: reg_op(s[0]),
        })
    });
    for (i, &(a, want)) in cases.iter().enumerate() {
        assert_eq!(
            got[i], want,
            "cvt {rounding:?} {to:?} <- {from:?} ({a:#x}) = {:#x}, want {want:#x}",
            got[i]
        );
    }
}

#[test]
fn float_to_int_saturates_and_maps_nan_to_zero() {
    let nan = f(f32::NAN);
    convert(
        Ty::F32,
        Ty::S32,
        Rounding::Zero,
        &[
            (f(2.7), 2),
            (f(-2.7), u(-2)),
            (nan, 0),
            (f(3e9), u(i32::MAX)),
            (f(-3e9), u(i32::MIN)),
            (f(f32::INFINITY), u(i32::MAX)),
            (f(-0.0), 0),
        ],
    );
    convert(
        Ty::F32,
        Ty::S32,
        Rounding::Nearest,
        &[(f(2.5), 2), (f(3.5), 4), (f(-2.5), u(-2)), (f(-2.6), u(-3))],
    );
    convert(
        Ty::F32,
        Ty::S32,
        Rounding::Down,
        &[(f(-2.1), u(-3)), (f(2.9), 2)],
    );
    convert(
        Ty::F32,
        Ty::S32,
        Rounding::Up,
        &[(f(-2.9), u(-2)), (f(2.1), 3)],
    );
    convert(
        Ty::F32,
        Ty::U32,
        Rounding::Zero,
        &[(f(-1.0), 0), (nan, 0), (f(5e9), 0xffff_ffff), (f(3.99), 3)],
    );
    // A NaN converted to a 64-bit integer gives 1 << 63 (PTX cvt, Integer Notes).
    convert(
        Ty::F32,
        Ty::S64,
        Rounding::Zero,
        &[(nan, 1 << 63), (f(-1.5), u64::MAX)],
    );
    convert(
        Ty::F32,
        Ty::U64,
        Rounding::Zero,
        &[(nan, 1 << 63), (f(2f32.powi(63)), 1 << 63)],
    );
}

#[test]
fn int_to_float_rounds_as_asked() {
    convert(
        Ty::S32,
        Ty::F32,
        Rounding::Nearest,
        &[
            (16_777_217, f(16_777_216.0)),
            (16_777_219, f(16_777_220.0)),
            (u(-16_777_217), f(-16_777_216.0)),
        ],
    );
    convert(
        Ty::U32,
        Ty::F32,
        Rounding::Nearest,
        &[(0xffff_ffff, f(4_294_967_296.0))],
    );
    convert(
        Ty::S32,
        Ty::F32,
        Rounding::Zero,
        &[
            (16_777_219, f(16_777_218.0)),
            (u(-16_777_219), f(-16_777_218.0)),
        ],
    );
    convert(
        Ty::S32,
        Ty::F32,
        Rounding::Up,
        &[
            (16_777_217, f(16_777_218.0)),
            (u(-16_777_217), f(-16_777_216.0)),
        ],
    );
    convert(
        Ty::S32,
        Ty::F32,
        Rounding::Down,
        &[
            (16_777_219, f(16_777_218.0)),
            (u(-16_777_217), f(-16_777_218.0)),
        ],
    );
    convert(
        Ty::U64,
        Ty::F32,
        Rounding::Nearest,
        &[(u64::MAX, f(18_446_744_073_709_551_616.0))],
    );
}

#[test]
fn integer_conversions_extend_by_source_sign() {
    convert(
        Ty::S32,
        Ty::S64,
        Rounding::Nearest,
        &[(u(-2), (-2i64) as u64)],
    );
    convert(
        Ty::U32,
        Ty::U64,
        Rounding::Nearest,
        &[(0xffff_fffe, 0xffff_fffe)],
    );
    convert(
        Ty::S64,
        Ty::S32,
        Rounding::Nearest,
        &[(0x1_2345_6789, 0x2345_6789)],
    );
    convert(Ty::B16, Ty::U32, Rounding::Nearest, &[(0xfffe, 0xfffe)]);
    convert(Ty::U32, Ty::B16, Rounding::Nearest, &[(0x1_2345, 0x2345)]);
}

#[test]
fn ex2_is_within_two_ulp_and_flushes_subnormals() {
    let sub = f32::from_bits(1);
    let hand = [
        (0.0, 1.0),
        (-0.0, 1.0),
        (1.0, 2.0),
        (-1.0, 0.5),
        (f32::NEG_INFINITY, 0.0),
        (f32::INFINITY, f32::INFINITY),
        (128.0, f32::INFINITY),
        // Subnormal input is flushed: 2^0.
        (sub, 1.0),
        // 2^-130 is subnormal: flushed to +0.
        (-130.0, 0.0),
        (-126.0, f32::MIN_POSITIVE),
    ];
    let sweep: Vec<f32> = (0..1000).map(|i| -120.0 + i as f32 * 0.24).collect();
    let mut inputs: Vec<Vec<u64>> = hand.iter().map(|&(x, _)| vec![f(x)]).collect();
    inputs.extend(sweep.iter().map(|&x| vec![f(x)]));
    inputs.push(vec![f(f32::NAN)]);
    let got = eval(&[Ty::F32], Ty::F32, &inputs, |dst, s| {
        Op::Alu(AluOp::Unary {
            op: UnaryOp::Ex2Approx,
            ty: Ty::F32,
            dst,
            a: reg_op(s[0]),
        })
    });
    for (i, &(x, want)) in hand.iter().enumerate() {
        assert_eq!(got[i], f(want), "ex2({x})");
    }
    for (j, &x) in sweep.iter().enumerate() {
        let g = f32::from_bits(got[hand.len() + j] as u32);
        let exact = (x as f64).exp2();
        let ulp = (exact as f32).to_bits().abs_diff(g.to_bits());
        assert!(ulp <= 2, "ex2({x}) = {g}, exact {exact}");
    }
    assert_eq!(*got.last().unwrap(), NAN);
}

#[test]
fn prmt_selp_pack_and_bitcasts() {
    let sel = |c: u64| {
        eval(
            &[Ty::B32, Ty::B32],
            Ty::B32,
            &[vec![0x8322_1100, 0x7766_5544]],
            |dst, s| {
                Op::Alu(AluOp::Prmt {
                    dst,
                    a: reg_op(s[0]),
                    b: reg_op(s[1]),
                    selector: Operand::Imm(c),
                })
            },
        )[0]
    };
    assert_eq!(sel(0x3210), 0x8322_1100);
    assert_eq!(sel(0x7654), 0x7766_5544);
    assert_eq!(sel(0x0123), 0x0011_2283);
    assert_eq!(sel(0x4444), 0x4444_4444);
    // Bit 3 of a selector replicates the byte's sign: byte 3 of a is 0x83, byte 4 is 0x44.
    assert_eq!(sel(0x00fb), 0x0000_00ff);
    assert_eq!(sel(0x000b), 0x0000_00ff);
    assert_eq!(sel(0x000c), 0x0000_0000);
    let got = eval(
        &[Ty::U32, Ty::U32, Ty::Pred],
        Ty::U32,
        &[vec![7, 9, 1], vec![7, 9, 0]],
        |dst, s| {
            Op::Alu(AluOp::Selp {
                ty: Ty::U32,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
                cond: s[2],
            })
        },
    );
    assert_eq!(got, vec![7, 9]);
    let got = eval(
        &[Ty::B16, Ty::B16],
        Ty::B32,
        &[vec![0xbeef, 0xdead]],
        |dst, s| {
            Op::Alu(AluOp::Pack {
                dst,
                lo: reg_op(s[0]),
                hi: reg_op(s[1]),
            })
        },
    );
    assert_eq!(got[0], 0xdead_beef);
    let got = eval(
        &[Ty::U32, Ty::U32],
        Ty::U64,
        &[vec![0x1111_2222, 0x3333_4444]],
        |dst, s| {
            Op::Alu(AluOp::Pack {
                dst,
                lo: reg_op(s[0]),
                hi: reg_op(s[1]),
            })
        },
    );
    assert_eq!(got[0], 0x3333_4444_1111_2222);
    // Unpack: the high half.
    let got = eval(&[Ty::B32], Ty::B16, &[vec![0xdead_beef]], |dst, s| {
        let lo = Reg(dst.0 + 1);
        Op::Alu(AluOp::Unpack {
            lo,
            hi: dst,
            src: s[0],
        })
    });
    assert_eq!(got[0], 0xdead);
    let got = eval(&[Ty::F32], Ty::U32, &[vec![f(-1.5)]], |dst, s| {
        Op::Alu(AluOp::BitCast { dst, src: s[0] })
    });
    assert_eq!(got[0], 0xbfc0_0000);
}

fn cvt(srcs: &[Ty], dst: Ty, rows: &[Vec<u64>], make: impl Fn(Reg, &[Reg]) -> CvtOp) -> Vec<u64> {
    eval(srcs, dst, rows, |d, s| Op::Cvt(make(d, s)))
}

#[test]
fn bf16x2_from_f32_rounds_to_nearest_even() {
    let cases: [(f32, u16); 10] = [
        (1.0, 0x3f80),
        // 1 + 2^-8 is a tie between 0x3f80 and 0x3f81: even.
        (f32::from_bits(0x3f80_8000), 0x3f80),
        (f32::from_bits(0x3f81_8000), 0x3f82),
        (f32::from_bits(0x3f80_8001), 0x3f81),
        (f32::INFINITY, 0x7f80),
        (f32::MAX, 0x7f80),
        (f32::NAN, 0x7fff),
        (-0.0, 0x8000),
        // Subnormal ties round to even too, and subnormals are kept.
        (f32::from_bits(0x0000_8000), 0x0000),
        (f32::from_bits(0x0001_8000), 0x0002),
    ];
    let rows: Vec<Vec<u64>> = cases.iter().map(|&(x, _)| vec![f(x), f(-x)]).collect();
    let got = cvt(&[Ty::F32, Ty::F32], Ty::B32, &rows, |dst, s| {
        CvtOp::F32x2ToBf16x2 {
            dst,
            lo: reg_op(s[0]),
            hi: reg_op(s[1]),
        }
    });
    for (i, &(x, want)) in cases.iter().enumerate() {
        let lo = got[i] as u16;
        let hi = (got[i] >> 16) as u16;
        assert_eq!(lo, want, "bf16({x})");
        let want_neg = if x.is_nan() { 0x7fff } else { want ^ 0x8000 };
        assert_eq!(hi, want_neg, "bf16({})", -x);
    }
}

fn e4m3_value(b: u8) -> f32 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xf) as i32;
    let m = (b & 7) as f32;
    s * if e == 0 {
        m / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + m / 8.0) * 2f32.powi(e - 7)
    }
}

#[test]
fn e4m3_conversions_are_exact_and_saturate() {
    let hand: [(f32, u8); 14] = [
        (448.0, 0x7e),
        (449.0, 0x7e),
        (1e9, 0x7e),
        (f32::INFINITY, 0x7e),
        (f32::NEG_INFINITY, 0xfe),
        (f32::NAN, 0x7f),
        (0.0, 0x00),
        (-0.0, 0x80),
        (2f32.powi(-9), 0x01),
        // 2^-10 is a tie between 0 and the smallest subnormal: even (0).
        (2f32.powi(-10), 0x00),
        (3.0 * 2f32.powi(-10), 0x02),
        // 1.0625 ties between 1.0 (0x38) and 1.125 (0x39): even.
        (1.0625, 0x38),
        (1.1875, 0x3a),
        (-1.75, 0xbe),
    ];
    let rows: Vec<Vec<u64>> = hand.iter().map(|&(x, _)| vec![f(x), f(1.0)]).collect();
    let got = cvt(&[Ty::F32, Ty::F32], Ty::B16, &rows, |dst, s| {
        CvtOp::F32x2ToE4m3x2 {
            dst,
            lo: reg_op(s[0]),
            hi: reg_op(s[1]),
        }
    });
    for (i, &(x, want)) in hand.iter().enumerate() {
        assert_eq!(got[i] as u8, want, "e4m3({x})");
        assert_eq!((got[i] >> 8) as u8, 0x38, "the high byte holds e4m3(1.0)");
    }
    // Every finite code converts back to itself, and up to f16 exactly.
    let codes: Vec<u8> = (0..=255u8).filter(|b| b & 0x7f != 0x7f).collect();
    let rows: Vec<Vec<u64>> = codes.iter().map(|&b| vec![f(e4m3_value(b)), 0]).collect();
    let got = cvt(&[Ty::F32, Ty::F32], Ty::B16, &rows, |dst, s| {
        CvtOp::F32x2ToE4m3x2 {
            dst,
            lo: reg_op(s[0]),
            hi: reg_op(s[1]),
        }
    });
    for (b, g) in codes.iter().zip(&got) {
        assert_eq!(*g as u8, *b, "round trip of e4m3 {b:#04x}");
    }
    let rows: Vec<Vec<u64>> = (0..=255u64).map(|b| vec![b | (0x38 << 8)]).collect();
    let got = cvt(&[Ty::B16], Ty::B32, &rows, |dst, s| CvtOp::E4m3x2ToF16x2 {
        dst,
        src: s[0],
    });
    for (b, g) in (0..=255u8).zip(&got) {
        let want = if b & 0x7f == 0x7f {
            0x7fff
        } else {
            half::f16::from_f32(e4m3_value(b)).to_bits()
        };
        assert_eq!(*g as u16, want, "f16 of e4m3 {b:#04x}");
        assert_eq!((*g >> 16) as u16, 0x3c00, "the high half is f16(1.0)");
    }
}

#[test]
fn e2m1_to_f16_is_exact_per_nibble() {
    const VALUES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for byte in 0..4u8 {
        let rows: Vec<Vec<u64>> = (0..=255u64).map(|b| vec![b << (8 * byte)]).collect();
        let got = cvt(&[Ty::B32], Ty::B32, &rows, |dst, s| CvtOp::E2m1x2ToF16x2 {
            dst,
            src: s[0],
            byte,
        });
        for (b, g) in (0..=255u32).zip(&got) {
            let value = |n: u32| {
                let v = VALUES[(n & 7) as usize];
                half::f16::from_f32(if n & 8 != 0 { -v } else { v }).to_bits()
            };
            assert_eq!(*g as u16, value(b & 0xf), "low nibble of {b:#04x}");
            assert_eq!((*g >> 16) as u16, value(b >> 4), "high nibble of {b:#04x}");
        }
    }
}

#[test]
fn ue8m0_rounds_up_and_saturates() {
    let sub = |m: u32| f32::from_bits(m);
    let cases: [(f32, u8); 16] = [
        (1.0, 127),
        (1.5, 128),
        (2.0, 128),
        (2.000_000_2, 129),
        (448.0 / 448.0, 127),
        (0.0, 0),
        (-0.0, 0),
        // The sign is dropped: the magnitude rounds up (no sign in ue8m0).
        (-3.0, 129),
        (sub(0x0000_0001), 0),
        // 2^-127 is exactly code 0; anything above it rounds up to 2^-126.
        (sub(0x0040_0000), 0),
        (sub(0x0040_0001), 1),
        (f32::MIN_POSITIVE, 1),
        (2f32.powi(127), 254),
        (f32::MAX, 254),
        (f32::INFINITY, 254),
        (f32::NAN, 255),
    ];
    let rows: Vec<Vec<u64>> = cases.iter().map(|&(x, _)| vec![f(x), f(0.25)]).collect();
    let got = cvt(&[Ty::F32, Ty::F32], Ty::B16, &rows, |dst, s| {
        CvtOp::F32x2ToUe8m0x2 {
            dst,
            lo: reg_op(s[0]),
            hi: reg_op(s[1]),
        }
    });
    for (i, &(x, want)) in cases.iter().enumerate() {
        assert_eq!(got[i] as u8, want, "ue8m0({x:e})");
        assert_eq!((got[i] >> 8) as u8, 125, "the high byte holds ue8m0(0.25)");
    }
    let rows: Vec<Vec<u64>> = [(0u64, 127u64), (254, 1), (255, 128)]
        .iter()
        .map(|&(lo, hi)| vec![lo | hi << 8])
        .collect();
    let got = cvt(&[Ty::B16], Ty::B32, &rows, |dst, s| {
        CvtOp::Ue8m0x2ToBf16x2 { dst, src: s[0] }
    });
    // e = 0 is the bf16 subnormal 2^-127, e = 255 is NaN.
    assert_eq!(got, vec![0x3f80_0040, 0x0080_7f00, 0x4000_7fff]);
}

#[test]
fn f16_to_f32_is_exact() {
    let rows: Vec<Vec<u64>> = (0..1024u64).map(|i| vec![i * 64 + 7]).collect();
    let got = cvt(&[Ty::B16], Ty::F32, &rows, |dst, s| CvtOp::F16ToF32 {
        dst,
        src: s[0],
    });
    for (r, g) in rows.iter().zip(&got) {
        let h = half::f16::from_bits(r[0] as u16);
        if h.is_nan() {
            assert_eq!(*g, NAN);
        } else {
            assert_eq!(*g, f(h.to_f32()), "f32 of f16 {:#06x}", r[0]);
        }
    }
}

#[test]
fn bf16x2_arithmetic_rounds_once() {
    let bf = |a: u16, b: u16| (b as u64) << 16 | a as u64;
    let mul = |a: u64, b: u64| {
        cvt(&[Ty::B32, Ty::B32], Ty::B32, &[vec![a, b]], |dst, s| {
            CvtOp::Bf16x2 {
                op: Bf16x2Arith::Mul,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
                c: Operand::Imm(0),
            }
        })[0]
    };
    // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 -> 1 + 2^-6; (1 + 2^-7) * 1.5 ties -> even 0x3fc2.
    assert_eq!(
        mul(bf(0x3f81, 0x3f81), bf(0x3f81, 0x3fc0)),
        bf(0x3f82, 0x3fc2)
    );
    // Subnormal products are kept: 2^-126 * 0.5 = 2^-127 (0x0040); overflow gives inf.
    assert_eq!(
        mul(bf(0x0080, 0x7f00), bf(0x3f00, 0x7f00)),
        bf(0x0040, 0x7f80)
    );
    let fma = |a: u64, b: u64, c: u64| {
        cvt(
            &[Ty::B32, Ty::B32, Ty::B32],
            Ty::B32,
            &[vec![a, b, c]],
            |dst, s| CvtOp::Bf16x2 {
                op: Bf16x2Arith::Fma,
                dst,
                a: reg_op(s[0]),
                b: reg_op(s[1]),
                c: reg_op(s[2]),
            },
        )[0]
    };
    // (1 + 2^-7)^2 - (1 + 2^-6) = 2^-14 exactly; rounding the product first would give 0.
    // (1 + 2^-7)^2 - 1 = 2^-6 + 2^-14: a tie at 2^-6's ulp, to even.
    assert_eq!(
        fma(bf(0x3f81, 0x3f81), bf(0x3f81, 0x3f81), bf(0xbf82, 0xbf80)),
        bf(0x3880, 0x3c80)
    );
    // NaN is canonical.
    assert_eq!(fma(bf(0x7fc1, 0), bf(0x3f80, 0), bf(0, 0)) as u16, 0x7fff);
}

fn shfl(mode: ShflMode, b: u64, c: u32) -> Vec<u64> {
    let rows: Vec<Vec<u64>> = (0..32u64).map(|l| vec![100 + l]).collect();
    eval(&[Ty::U32], Ty::U32, &rows, |dst, s| {
        Op::Sync(SyncOp::Shfl {
            mode,
            dst,
            src: s[0],
            b: Operand::Imm(b),
            c,
        })
    })
}

#[test]
fn shfl_modes_follow_the_ptx_lane_rules() {
    let lanes = |f: &dyn Fn(u64) -> u64| (0..32).map(|l| 100 + f(l)).collect::<Vec<_>>();
    assert_eq!(shfl(ShflMode::Bfly, 1, 0x1f), lanes(&|l| l ^ 1));
    assert_eq!(shfl(ShflMode::Bfly, 16, 0x1f), lanes(&|l| l ^ 16));
    assert_eq!(shfl(ShflMode::Idx, 5, 0x1f), lanes(&|_| 5));
    // Out of range: a lane keeps its own value.
    assert_eq!(
        shfl(ShflMode::Down, 3, 0x1f),
        lanes(&|l| if l + 3 <= 31 { l + 3 } else { l })
    );
    assert_eq!(
        shfl(ShflMode::Up, 3, 0),
        lanes(&|l| if l >= 3 { l - 3 } else { l })
    );
    // Segments of 8 lanes: segment mask 0x18 in bits 12:8, clamp 7 in bits 4:0.
    let seg8 = 0x18 << 8 | 0x07;
    assert_eq!(shfl(ShflMode::Idx, 2, seg8), lanes(&|l| (l & !7) | 2));
    assert_eq!(
        shfl(ShflMode::Down, 1, seg8),
        lanes(&|l| if l % 8 == 7 { l } else { l + 1 })
    );
    assert_eq!(shfl(ShflMode::Bfly, 4, seg8), lanes(&|l| l ^ 4));
    // .up's bound is the segment start: c = segmask << 8 (clamp 0).
    assert_eq!(
        shfl(ShflMode::Up, 1, 0x18 << 8),
        lanes(&|l| if l % 8 == 0 { l } else { l - 1 })
    );
    // A clamp below 31 with no segment bounds .down and .bfly.
    assert_eq!(
        shfl(ShflMode::Down, 4, 15),
        lanes(&|l| if l + 4 <= 15 { l + 4 } else { l })
    );
}

#[test]
fn ballot_and_elect() {
    let rows: Vec<Vec<u64>> = (0..32u64).map(|l| vec![(l % 3 == 0) as u64]).collect();
    let got = eval(&[Ty::Pred], Ty::U32, &rows, |dst, s| {
        Op::Sync(SyncOp::Ballot { dst, pred: s[0] })
    });
    let want: u64 = (0..32).filter(|l| l % 3 == 0).map(|l| 1u64 << l).sum();
    assert!(got.iter().all(|&g| g == want));
    let rows: Vec<Vec<u64>> = (0..64u64).map(|_| vec![]).collect();
    let got = eval(&[], Ty::Pred, &rows, |dst, _| {
        Op::Sync(SyncOp::Elect { dst })
    });
    let leaders: Vec<usize> = (0..64).filter(|&i| got[i] != 0).collect();
    assert_eq!(
        leaders,
        vec![0, 32],
        "one leader, the lowest lane, per warp"
    );
}

/// Runs `f(word)` for each input word (one thread each) through a traced kernel.
fn traced(
    target: Target,
    inputs: &[u32],
    f: impl Fn(dsl_core::trace::Val<u32>) -> dsl_core::trace::Val<u32>,
) -> Vec<u32> {
    use dsl_core::arch::memory::{load, store};
    use dsl_core::arch::thread::{block_idx_x, thread_idx_x};
    use dsl_core::trace::{KernelParam, Tensor, threads, trace_kernel};
    let n = inputs.len().next_multiple_of(128);
    let k = trace_kernel("paths", target, || {
        threads(128, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let i = block_idx_x() * 128u32 + thread_idx_x();
        let at = x.base() + i.mul_wide(4);
        let v = load(at);
        store(at, f(v));
    })
    .unwrap();
    let mut mem = Memory::new();
    let mut data = inputs.to_vec();
    data.resize(n, 0);
    let x = mem.alloc_from("x", &data);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(x, &[n as i64])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    mem.read::<u32>(x)[..inputs.len()].to_vec()
}

#[test]
fn the_dsl_native_and_emulated_conversions_agree() {
    use dsl_core::arch::cvt::{
        CvtPath, e2m1x8_to_bf16x8_with, ue8m0_round_up_with, ue8m0_to_bf16x2_with,
    };
    // ue8m0 round-up: every exponent, mantissas at the edges, subnormals, inf, NaN. The
    // emulated path maps negative inputs to 0 while the instruction rounds |x| (PTX
    // .satfinite: "a positive MAX_NORM in .ue8m0x2 for which the destination sign is not
    // supported"), so only non-negative inputs are compared.
    let mut xs: Vec<u32> = (0..256u32)
        .flat_map(|e| [0, 1, 0x40_0000, 0x40_0001, 0x7f_ffff].map(|m| e << 23 | m))
        .collect();
    xs.push(0x7fc0_0000);
    let native = traced(Target::Sm100a, &xs, |v| {
        ue8m0_round_up_with(v.bitcast(), CvtPath::Native)
    });
    let emulated = traced(Target::Sm100a, &xs, |v| {
        ue8m0_round_up_with(v.bitcast(), CvtPath::Emulated)
    });
    for ((x, n), e) in xs.iter().zip(&native).zip(&emulated) {
        assert_eq!(n, e, "ue8m0 of {x:#010x}");
    }
    let es: Vec<u32> = (0..256).collect();
    let native = traced(Target::Sm100a, &es, |e| {
        ue8m0_to_bf16x2_with(e, CvtPath::Native).bitcast()
    });
    let emulated = traced(Target::Sm100a, &es, |e| {
        ue8m0_to_bf16x2_with(e, CvtPath::Emulated).bitcast()
    });
    assert_eq!(native, emulated, "ue8m0 -> bf16x2");
    // Every byte in every byte position, and words whose nibbles all differ.
    let mut words: Vec<u32> = (0..256u32).map(|b| b * 0x0101_0101).collect();
    words.extend(
        (0..256u32).map(|i| 0x7654_3210u32.rotate_left(4 * (i % 8)) ^ (i << 24) ^ (i << 4)),
    );
    for pair in 0..4 {
        let native = traced(Target::Sm100a, &words, |w| {
            e2m1x8_to_bf16x8_with(w, CvtPath::Native)[pair].bitcast()
        });
        let emulated = traced(Target::Sm100a, &words, |w| {
            e2m1x8_to_bf16x8_with(w, CvtPath::Emulated)[pair].bitcast()
        });
        assert_eq!(native, emulated, "e2m1x8 pair {pair} -> bf16x2");
    }
}
