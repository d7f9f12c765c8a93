//! One printing arm per op of the target-independent families.

use super::Printer;
use crate::ir::{
    AccessTy, AluOp, ArriveSemantics, Bf16x2Arith, BinaryOp, CacheHint, ClusterOp, CmpOp, CvtOp,
    FenceKind, MbarrierOp, MemOp, Op, Operand, Rounding, ShflMode, Space, SyncOp, Ty, UnaryOp,
};

pub(super) fn inst(p: &mut Printer, op: &Op) {
    match op {
        Op::Alu(op) => alu(p, op),
        Op::Cvt(op) => cvt(p, op),
        Op::Mem(op) => mem(p, op),
        Op::Copy(op) => super::copy::copy(p, op),
        Op::Sync(op) => sync(p, op),
        Op::Mbarrier(op) => mbarrier(p, op),
        Op::Cluster(op) => cluster(p, op),
        Op::Tcgen05(op) => super::sm100::tcgen05(p, op),
        Op::Wgmma(op) => super::sm90::wgmma(p, op),
    }
}

/// The untyped move suffix of a register type.
fn bits_ty(ty: Ty) -> &'static str {
    match ty {
        Ty::Pred => "pred",
        Ty::B16 => "b16",
        Ty::B32 | Ty::U32 | Ty::S32 => "b32",
        Ty::U64 | Ty::S64 => "b64",
        Ty::F32 => "f32",
    }
}

/// The bitwise-op suffix (`and.b32`, `and.pred`).
fn logic_ty(ty: Ty) -> &'static str {
    match ty {
        Ty::F32 => "b32",
        other => bits_ty(other),
    }
}

fn alu(p: &mut Printer, op: &AluOp) {
    let line = match op {
        AluOp::Mov { dst, src } => {
            let ty = p.reg_ty(*dst);
            format!(
                "mov.{} {}, {};",
                bits_ty(ty),
                p.reg(*dst),
                p.operand(*src, ty)
            )
        }
        AluOp::Unary { op, ty, dst, a } => {
            let mnemonic = match op {
                UnaryOp::Neg => format!("neg.{}", ty.ptx()),
                UnaryOp::Not => format!("not.{}", logic_ty(*ty)),
                UnaryOp::Abs => format!("abs.{}", ty.ptx()),
                UnaryOp::Ex2Approx => "ex2.approx.ftz.f32".to_string(),
                UnaryOp::Rcp => "rcp.rn.f32".to_string(),
            };
            format!("{mnemonic} {}, {};", p.reg(*dst), p.operand(*a, *ty))
        }
        AluOp::Binary { op, ty, dst, a, b } => {
            let t = ty.ptx();
            let float = ty.is_float();
            let mnemonic = match op {
                BinaryOp::Add if float => "add.rn.f32".to_string(),
                BinaryOp::Sub if float => "sub.rn.f32".to_string(),
                BinaryOp::Mul if float => "mul.rn.f32".to_string(),
                BinaryOp::Div if float => "div.rn.f32".to_string(),
                BinaryOp::Add => format!("add.{t}"),
                BinaryOp::Sub => format!("sub.{t}"),
                BinaryOp::Mul => format!("mul.lo.{t}"),
                BinaryOp::MulHi => format!("mul.hi.{t}"),
                BinaryOp::Div => format!("div.{t}"),
                BinaryOp::Rem => format!("rem.{t}"),
                BinaryOp::Min => format!("min.{t}"),
                BinaryOp::Max => format!("max.{t}"),
                BinaryOp::And => format!("and.{}", logic_ty(*ty)),
                BinaryOp::Or => format!("or.{}", logic_ty(*ty)),
                BinaryOp::Xor => format!("xor.{}", logic_ty(*ty)),
                BinaryOp::Shl => format!("shl.{}", logic_ty(*ty)),
                BinaryOp::Shr => format!("shr.{t}"),
            };
            let b_ty = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
                Ty::U32
            } else {
                *ty
            };
            format!(
                "{mnemonic} {}, {}, {};",
                p.reg(*dst),
                p.operand(*a, *ty),
                p.operand(*b, b_ty)
            )
        }
        AluOp::MulWide { ty, dst, a, b } => format!(
            "mul.wide.{} {}, {}, {};",
            ty.ptx(),
            p.reg(*dst),
            p.operand(*a, *ty),
            p.operand(*b, *ty)
        ),
        AluOp::Fma { ty, dst, a, b, c } => {
            let mnemonic = if ty.is_float() {
                "fma.rn.f32".to_string()
            } else {
                format!("mad.lo.{}", ty.ptx())
            };
            format!(
                "{mnemonic} {}, {}, {}, {};",
                p.reg(*dst),
                p.operand(*a, *ty),
                p.operand(*b, *ty),
                p.operand(*c, *ty)
            )
        }
        AluOp::Setp { cmp, ty, dst, a, b } => {
            let c = match (cmp, ty.is_float()) {
                (CmpOp::Eq, _) => "eq",
                (CmpOp::Ne, true) => "neu",
                (CmpOp::Ne, false) => "ne",
                (CmpOp::Lt, _) => "lt",
                (CmpOp::Le, _) => "le",
                (CmpOp::Gt, _) => "gt",
                (CmpOp::Ge, _) => "ge",
            };
            format!(
                "setp.{c}.{} {}, {}, {};",
                ty.ptx(),
                p.reg(*dst),
                p.operand(*a, *ty),
                p.operand(*b, *ty)
            )
        }
        AluOp::Selp {
            ty,
            dst,
            a,
            b,
            cond,
        } => format!(
            "selp.{} {}, {}, {}, {};",
            bits_ty(*ty),
            p.reg(*dst),
            p.operand(*a, *ty),
            p.operand(*b, *ty),
            p.reg(*cond)
        ),
        AluOp::Convert {
            dst_ty,
            src_ty,
            rounding,
            dst,
            src,
        } => {
            let name = |ty: Ty| match ty {
                Ty::B16 => "u16",
                other => other.ptx(),
            };
            let rnd = match (src_ty.is_float(), dst_ty.is_float()) {
                (true, false) => match rounding {
                    Rounding::Nearest => ".rni",
                    Rounding::Zero => ".rzi",
                    Rounding::Down => ".rmi",
                    Rounding::Up => ".rpi",
                },
                (false, true) => match rounding {
                    Rounding::Nearest => ".rn",
                    Rounding::Zero => ".rz",
                    Rounding::Down => ".rm",
                    Rounding::Up => ".rp",
                },
                _ => "",
            };
            format!(
                "cvt{rnd}.{}.{} {}, {};",
                name(*dst_ty),
                name(*src_ty),
                p.reg(*dst),
                p.operand(*src, *src_ty)
            )
        }
        AluOp::BitCast { dst, src } => {
            let width = if p.reg_ty(*dst).bits() == 64 {
                "b64"
            } else {
                "b32"
            };
            format!("mov.{width} {}, {};", p.reg(*dst), p.reg(*src))
        }
        AluOp::Pack { dst, lo, hi } => {
            let dst_ty = p.reg_ty(*dst);
            let (width, half) = if dst_ty.bits() == 64 {
                ("b64", Ty::U32)
            } else {
                ("b32", Ty::B16)
            };
            format!(
                "mov.{width} {}, {{{}, {}}};",
                p.reg(*dst),
                p.operand(*lo, half),
                p.operand(*hi, half)
            )
        }
        AluOp::Unpack { lo, hi, src } => {
            let width = if p.reg_ty(*src).bits() == 64 {
                "b64"
            } else {
                "b32"
            };
            format!(
                "mov.{width} {{{}, {}}}, {};",
                p.reg(*lo),
                p.reg(*hi),
                p.reg(*src)
            )
        }
        AluOp::Prmt {
            dst,
            a,
            b,
            selector,
        } => format!(
            "prmt.b32 {}, {}, {}, {};",
            p.reg(*dst),
            p.operand(*a, Ty::B32),
            p.operand(*b, Ty::B32),
            p.operand(*selector, Ty::B32)
        ),
    };
    p.line(&line);
}

fn cvt(p: &mut Printer, op: &CvtOp) {
    let line = match op {
        CvtOp::F32x2ToBf16x2 { dst, lo, hi } => format!(
            "cvt.rn.bf16x2.f32 {}, {}, {};",
            p.reg(*dst),
            p.operand(*hi, Ty::F32),
            p.operand(*lo, Ty::F32)
        ),
        CvtOp::F32x2ToE4m3x2 { dst, lo, hi } => format!(
            "cvt.rn.satfinite.e4m3x2.f32 {}, {}, {};",
            p.reg(*dst),
            p.operand(*hi, Ty::F32),
            p.operand(*lo, Ty::F32)
        ),
        CvtOp::E4m3x2ToF16x2 { dst, src } => {
            format!("cvt.rn.f16x2.e4m3x2 {}, {};", p.reg(*dst), p.reg(*src))
        }
        CvtOp::E2m1x2ToF16x2 { dst, src, byte } => {
            p.line("{");
            p.line("    .reg .b8 %e2m1_<4>;");
            p.line(&format!(
                "    mov.b32 {{%e2m1_0, %e2m1_1, %e2m1_2, %e2m1_3}}, {};",
                p.reg(*src)
            ));
            p.line(&format!(
                "    cvt.rn.f16x2.e2m1x2 {}, %e2m1_{byte};",
                p.reg(*dst)
            ));
            "}".to_string()
        }
        CvtOp::F32x2ToUe8m0x2 { dst, lo, hi } => format!(
            "cvt.rp.satfinite.ue8m0x2.f32 {}, {}, {};",
            p.reg(*dst),
            p.operand(*hi, Ty::F32),
            p.operand(*lo, Ty::F32)
        ),
        CvtOp::Ue8m0x2ToBf16x2 { dst, src } => {
            format!("cvt.rn.bf16x2.ue8m0x2 {}, {};", p.reg(*dst), p.reg(*src))
        }
        CvtOp::F16ToF32 { dst, src } => {
            format!("cvt.f32.f16 {}, {};", p.reg(*dst), p.reg(*src))
        }
        CvtOp::Bf16x2 { op, dst, a, b, c } => match op {
            Bf16x2Arith::Mul => format!(
                "mul.rn.bf16x2 {}, {}, {};",
                p.reg(*dst),
                p.operand(*a, Ty::B32),
                p.operand(*b, Ty::B32)
            ),
            Bf16x2Arith::Fma => format!(
                "fma.rn.bf16x2 {}, {}, {}, {};",
                p.reg(*dst),
                p.operand(*a, Ty::B32),
                p.operand(*b, Ty::B32),
                p.operand(*c, Ty::B32)
            ),
        },
    };
    p.line(&line);
}

fn space(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::SharedCluster => "shared::cluster",
    }
}

pub(super) fn vector(n: usize) -> &'static str {
    match n {
        1 => "",
        2 => ".v2",
        4 => ".v4",
        _ => unreachable!("ir::verify admits vector accesses of 1, 2 or 4 elements only"),
    }
}

pub(super) fn address(p: &Printer, addr: &Operand, offset: i32) -> String {
    let base = match addr {
        Operand::Reg(r) => p.reg(*r),
        Operand::Imm(a) => format!("{a}"),
    };
    match offset {
        0 => format!("[{base}]"),
        o if o > 0 => format!("[{base}+{o}]"),
        o => format!("[{base}{o}]"),
    }
}

fn guard(p: &Printer, pred: &Option<crate::ir::Reg>) -> String {
    pred.map(|r| format!("@{} ", p.reg(r))).unwrap_or_default()
}

pub(super) fn regs_list(regs: &[String]) -> String {
    if regs.len() == 1 {
        regs[0].clone()
    } else {
        format!("{{{}}}", regs.join(", "))
    }
}

fn mem(p: &mut Printer, op: &MemOp) {
    let line = match op {
        MemOp::LdParam { dst, param, offset } => {
            let ty = p.reg_ty(*dst);
            let name = p.param_name(*param).to_string();
            let place = if *offset == 0 {
                format!("[{name}]")
            } else {
                format!("[{name}+{offset}]")
            };
            format!("ld.param.{} {}, {place};", super::param_ty(ty), p.reg(*dst))
        }
        MemOp::CvtaGlobal { dst, src } => {
            format!("cvta.to.global.u64 {}, {};", p.reg(*dst), p.reg(*src))
        }
        MemOp::SmemBase { dst } => format!("mov.u32 {}, smem;", p.reg(*dst)),
        MemOp::ParamAddress { dst, param } => {
            format!("cvta.param.u64 {}, {};", p.reg(*dst), p.param_name(*param))
        }
        MemOp::LdMatrix { dst, addr, trans } => format!(
            "ldmatrix.sync.aligned.m8n8{}.shared.b16 {}, {};",
            matrix_shape(dst.len(), *trans),
            matrix_regs(p, dst),
            address(p, addr, 0)
        ),
        MemOp::StMatrix { src, addr, trans } => format!(
            "stmatrix.sync.aligned.m8n8{}.shared.b16 {}, {};",
            matrix_shape(src.len(), *trans),
            address(p, addr, 0),
            matrix_regs(p, src)
        ),
        MemOp::Ld {
            space: s,
            ty,
            dst,
            addr,
            offset,
            cache,
            pred,
        } => {
            let nc = if *cache == CacheHint::NonCoherent {
                ".nc"
            } else {
                ""
            };
            let regs: Vec<String> = dst.iter().map(|r| p.reg(*r)).collect();
            format!(
                "{}ld.{}{nc}{}.{} {}, {};",
                guard(p, pred),
                space(*s),
                vector(dst.len()),
                access_ty(*ty, p.reg_ty(dst[0])),
                regs_list(&regs),
                address(p, addr, *offset)
            )
        }
        MemOp::AtomAdd {
            dst,
            addr,
            offset,
            src,
            order,
        } => format!(
            "atom.{}.gpu.global.add.u32 {}, {}, {};",
            order.ptx(),
            p.reg(*dst),
            address(p, addr, *offset),
            p.operand(*src, Ty::U32)
        ),
        MemOp::St {
            space: s,
            ty,
            src,
            addr,
            offset,
            pred,
        } => {
            let value_ty = match ty {
                AccessTy::B64 => Ty::U64,
                _ => Ty::U32,
            };
            let vals: Vec<String> = src.iter().map(|o| p.operand(*o, value_ty)).collect();
            let reg_ty = src
                .iter()
                .find_map(|o| o.reg())
                .map(|r| p.reg_ty(r))
                .unwrap_or(value_ty);
            format!(
                "{}st.{}{}.{} {}, {};",
                guard(p, pred),
                space(*s),
                vector(src.len()),
                access_ty(*ty, reg_ty),
                address(p, addr, *offset),
                regs_list(&vals)
            )
        }
    };
    p.line(&line);
}

/// `.xN{.trans}` of ldmatrix and stmatrix.
fn matrix_shape(n: usize, trans: bool) -> String {
    format!(".x{n}{}", if trans { ".trans" } else { "" })
}

/// The braced register vector of ldmatrix and stmatrix (braced for one register too).
fn matrix_regs(p: &Printer, regs: &[crate::ir::Reg]) -> String {
    let names: Vec<String> = regs.iter().map(|r| p.reg(*r)).collect();
    format!("{{{}}}", names.join(", "))
}

/// The access type suffix; f32 registers move as `.f32`.
fn access_ty(ty: AccessTy, reg_ty: Ty) -> &'static str {
    match (ty, reg_ty) {
        (AccessTy::B32, Ty::F32) => "f32",
        (t, _) => t.ptx(),
    }
}

fn sync(p: &mut Printer, op: &SyncOp) {
    let line = match op {
        SyncOp::ReadSpecial { dst, reg } => format!("mov.u32 {}, {};", p.reg(*dst), reg.ptx()),
        SyncOp::BarSync { id } => format!("bar.sync {id};"),
        SyncOp::NamedBarrier { id, threads, wait } => {
            let verb = if *wait { "sync" } else { "arrive" };
            format!("bar.{verb} {id}, {threads};")
        }
        SyncOp::SetMaxNreg { regs, increase } => {
            let dir = if *increase { "inc" } else { "dec" };
            format!("setmaxnreg.{dir}.sync.aligned.u32 {regs};")
        }
        SyncOp::Shfl {
            mode,
            dst,
            src,
            b,
            c,
        } => {
            let m = match mode {
                ShflMode::Bfly => "bfly",
                ShflMode::Idx => "idx",
                ShflMode::Up => "up",
                ShflMode::Down => "down",
            };
            format!(
                "shfl.sync.{m}.b32 {}, {}, {}, {c}, 0xFFFFFFFF;",
                p.reg(*dst),
                p.reg(*src),
                p.operand(*b, Ty::U32)
            )
        }
        SyncOp::Ballot { dst, pred } => format!(
            "vote.sync.ballot.b32 {}, {}, 0xFFFFFFFF;",
            p.reg(*dst),
            p.reg(*pred)
        ),
        SyncOp::Elect { dst } => format!("elect.sync _|{}, 0xFFFFFFFF;", p.reg(*dst)),
        SyncOp::Fence(kind) => match kind {
            FenceKind::ProxyAsyncSharedCta => "fence.proxy.async.shared::cta;".into(),
            FenceKind::AcqRelCluster => "fence.acq_rel.cluster;".into(),
            FenceKind::AcqRelGpu => "fence.acq_rel.gpu;".into(),
            FenceKind::MbarrierInit => "fence.mbarrier_init.release.cluster;".into(),
        },
        SyncOp::GridDepWait => "griddepcontrol.wait;".into(),
        SyncOp::GridDepLaunchDependents => "griddepcontrol.launch_dependents;".into(),
    };
    p.line(&line);
}

fn bar_address(p: &Printer, bar: &Operand) -> String {
    address(p, bar, 0)
}

fn mbarrier(p: &mut Printer, op: &MbarrierOp) {
    match op {
        MbarrierOp::Init { bar, count } => {
            let line = format!(
                "mbarrier.init.shared::cta.b64 {}, {};",
                bar_address(p, bar),
                p.operand(*count, Ty::U32)
            );
            p.line(&line)
        }
        MbarrierOp::Arrive { bar } => {
            let line = format!(
                "mbarrier.arrive.shared::cta.b64 _, {};",
                bar_address(p, bar)
            );
            p.line(&line)
        }
        MbarrierOp::ArriveExpectTx { bar, tx_bytes } => {
            let line = format!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, {}, {};",
                bar_address(p, bar),
                p.operand(*tx_bytes, Ty::U32)
            );
            p.line(&line)
        }
        MbarrierOp::ExpectTx { bar, tx_bytes } => {
            let line = format!(
                "mbarrier.expect_tx.shared::cta.b64 {}, {};",
                bar_address(p, bar),
                p.operand(*tx_bytes, Ty::U32)
            );
            p.line(&line)
        }
        MbarrierOp::ArriveCluster { bar } => {
            let line = format!(
                "mbarrier.arrive.release.cluster.shared::cluster.b64 _, {};",
                bar_address(p, bar)
            );
            p.line(&line)
        }
        MbarrierOp::WaitParity { bar, parity } => wait_parity(p, bar, parity, ""),
        MbarrierOp::WaitParityCluster { bar, parity } => {
            wait_parity(p, bar, parity, ".acquire.cluster")
        }
    }
}

/// A `try_wait.parity` loop on `bar` with the memory semantics `sem` (empty: the default,
/// acquire at CTA scope).
fn wait_parity(p: &mut Printer, bar: &Operand, parity: &Operand, sem: &str) {
    let label = p.fresh_label("wait");
    let bar = bar_address(p, bar);
    let parity = p.operand(*parity, Ty::U32);
    p.line("{");
    p.line("    .reg .pred %ready;");
    p.label(&label);
    p.line(&format!(
        "    mbarrier.try_wait.parity{sem}.shared::cta.b64 %ready, {bar}, {parity};"
    ));
    p.line(&format!("    @!%ready bra {label};"));
    p.line("}");
}

fn cluster(p: &mut Printer, op: &ClusterOp) {
    let line = match op {
        ClusterOp::Arrive { semantics } => match semantics {
            ArriveSemantics::Release => "barrier.cluster.arrive.release.aligned;".to_string(),
            ArriveSemantics::Relaxed => "barrier.cluster.arrive.relaxed.aligned;".to_string(),
        },
        ClusterOp::Wait => "barrier.cluster.wait.aligned;".to_string(),
        ClusterOp::Mapa { dst, addr, rank } => format!(
            "mapa.shared::cluster.u32 {}, {}, {};",
            p.reg(*dst),
            p.operand(*addr, Ty::U32),
            p.operand(*rank, Ty::U32)
        ),
    };
    p.line(&line);
}
