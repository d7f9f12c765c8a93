//! Each op kind as a line of the text form and back: [`lower`] for the printer, [`build`]
//! for the parser. Both match exhaustively (on the op, on the kind), so a new op must be
//! given a line form in both directions.

use crate::ir::{
    AccessTy, AluOp, ArriveSemantics, AtomOrder, Bf16x2Arith, BinaryOp, BulkWait, CacheHint,
    ClusterOp, CmpOp, CopyOp, CvtOp, FenceKind, MbarrierOp, MemOp, Op, Operand, Param, Reg,
    Rounding, ShflMode, Space, SpecialReg, SyncOp, Tcgen05Op, Ty, UnaryOp, WgmmaOp,
};

use super::OpKind;
use super::line::{Arg, Line};
use super::parse::ParseError;
use super::words::Word;

fn float_if(ty: Ty, o: Operand) -> Arg {
    if ty == Ty::F32 {
        Arg::Float(o)
    } else {
        Arg::Val(o)
    }
}

fn ops(os: &[Operand]) -> Arg {
    match os {
        [o] => Arg::Val(*o),
        _ => Arg::List(os.to_vec()),
    }
}

/// `op` as a line; `reg_ty` gives register types and `param` parameter names.
pub(crate) fn lower(op: &Op, reg_ty: &dyn Fn(Reg) -> Ty, param: &dyn Fn(u32) -> String) -> Line {
    let l = Line::new(OpKind::of(op));
    match op {
        Op::Alu(op) => match op {
            AluOp::Mov { dst, src } => l.def(*dst).arg(float_if(reg_ty(*dst), *src)),
            AluOp::Unary { ty, dst, a, .. } => l.def(*dst).suffix(ty.word()).arg(float_if(*ty, *a)),
            AluOp::Binary { ty, dst, a, b, .. } => l
                .def(*dst)
                .suffix(ty.word())
                .arg(float_if(*ty, *a))
                .arg(float_if(*ty, *b)),
            AluOp::MulWide { ty, dst, a, b } => l.def(*dst).suffix(ty.word()).val(*a).val(*b),
            AluOp::Fma { ty, dst, a, b, c } => l
                .def(*dst)
                .suffix(ty.word())
                .arg(float_if(*ty, *a))
                .arg(float_if(*ty, *b))
                .arg(float_if(*ty, *c)),
            AluOp::Setp { cmp, ty, dst, a, b } => l
                .def(*dst)
                .suffix(cmp.word())
                .suffix(ty.word())
                .arg(float_if(*ty, *a))
                .arg(float_if(*ty, *b)),
            AluOp::Selp {
                ty,
                dst,
                a,
                b,
                cond,
            } => l
                .def(*dst)
                .suffix(ty.word())
                .arg(float_if(*ty, *a))
                .arg(float_if(*ty, *b))
                .reg(*cond),
            AluOp::Convert {
                dst_ty,
                src_ty,
                rounding,
                dst,
                src,
            } => l
                .def(*dst)
                .suffix(rounding.word())
                .suffix(dst_ty.word())
                .suffix(src_ty.word())
                .arg(float_if(*src_ty, *src)),
            AluOp::BitCast { dst, src } => l.def(*dst).reg(*src),
            AluOp::Pack { dst, lo, hi } => l.def(*dst).val(*lo).val(*hi),
            AluOp::Unpack { lo, hi, src } => l.def(*lo).def(*hi).reg(*src),
            AluOp::Prmt {
                dst,
                a,
                b,
                selector,
            } => l.def(*dst).val(*a).val(*b).val(*selector),
        },
        Op::Cvt(op) => match op {
            CvtOp::F32x2ToBf16x2 { dst, lo, hi }
            | CvtOp::F32x2ToE4m3x2 { dst, lo, hi }
            | CvtOp::F32x2ToUe8m0x2 { dst, lo, hi } => {
                l.def(*dst).arg(Arg::Float(*lo)).arg(Arg::Float(*hi))
            }
            CvtOp::E4m3x2ToF16x2 { dst, src }
            | CvtOp::Ue8m0x2ToBf16x2 { dst, src }
            | CvtOp::F16ToF32 { dst, src } => l.def(*dst).reg(*src),
            CvtOp::E2m1x2ToF16x2 { dst, src, byte } => l.def(*dst).reg(*src).int(*byte),
            CvtOp::Bf16x2 { dst, a, b, c, .. } => l.def(*dst).val(*a).val(*b).val(*c),
        },
        Op::Mem(op) => match op {
            MemOp::LdParam {
                dst,
                param: p,
                offset,
            } => l.def(*dst).arg(Arg::Word(param(*p))).int(*offset),
            MemOp::CvtaGlobal { dst, src } => l.def(*dst).reg(*src),
            MemOp::SmemBase { dst } => l.def(*dst),
            MemOp::ParamAddress { dst, param: p } => l.def(*dst).arg(Arg::Word(param(*p))),
            MemOp::Ld {
                space,
                ty,
                dst,
                addr,
                offset,
                cache,
                pred,
            } => {
                let mut l = l.defs(dst).suffix(space.word());
                if *cache == CacheHint::NonCoherent {
                    l = l.suffix("nc");
                }
                let mut l = l.suffix(ty.word()).arg(Arg::Addr(*addr, *offset));
                l.pred = *pred;
                l
            }
            MemOp::St {
                space,
                ty,
                src,
                addr,
                offset,
                pred,
            } => {
                let mut l = l
                    .suffix(space.word())
                    .suffix(ty.word())
                    .arg(Arg::Addr(*addr, *offset))
                    .arg(ops(src));
                l.pred = *pred;
                l
            }
            MemOp::LdMatrix { dst, addr, trans } => {
                let l = if *trans { l.suffix("trans") } else { l };
                l.defs(dst).at(*addr)
            }
            MemOp::StMatrix { src, addr, trans } => {
                let l = if *trans { l.suffix("trans") } else { l };
                l.at(*addr).list(src)
            }
            MemOp::AtomAdd {
                dst,
                addr,
                offset,
                src,
                order,
            } => l
                .def(*dst)
                .suffix(order.word())
                .arg(Arg::Addr(*addr, *offset))
                .val(*src),
        },
        Op::Copy(op) => match op {
            CopyOp::CpAsync {
                dst,
                src,
                bytes,
                src_bytes,
            } => {
                let l = l.at(*dst).at(*src).int(*bytes);
                match src_bytes {
                    Some(n) => l.val(*n),
                    None => l,
                }
            }
            CopyOp::CpAsyncWait { n } => l.int(*n),
            CopyOp::BulkLoad {
                dst,
                src,
                bytes,
                bar,
            } => l.at(*dst).at(*src).val(*bytes).at(*bar),
            CopyOp::TensorLoad {
                dst,
                map,
                coords,
                bar,
                multicast,
            } => {
                let l = l.at(*dst).reg(*map).arg(Arg::List(coords.clone())).at(*bar);
                match multicast {
                    Some(m) => l.val(*m),
                    None => l,
                }
            }
            CopyOp::TensorStore { src, map, coords } => {
                l.reg(*map).arg(Arg::List(coords.clone())).at(*src)
            }
            CopyOp::BulkWaitGroup { n, until } => {
                let l = match until {
                    BulkWait::Read => l.suffix("read"),
                    BulkWait::Written => l,
                };
                l.int(*n)
            }
            CopyOp::PrefetchTensorMap { map } => l.reg(*map),
            CopyOp::BulkPrefetchL2 { src, bytes } => l.at(*src).val(*bytes),
            CopyOp::StoreAsync { dst, src, bar } => l.at(*dst).arg(ops(src)).at(*bar),
            CopyOp::CpAsyncCommit | CopyOp::BulkCommit => l,
        },
        Op::Sync(op) => match op {
            SyncOp::ReadSpecial { dst, reg } => l.def(*dst).arg(Arg::Word(reg.word().into())),
            SyncOp::BarSync { id } => l.int(*id),
            SyncOp::NamedBarrier { id, threads, .. } => l.int(*id).int(*threads),
            SyncOp::SetMaxNreg { regs, .. } => l.int(*regs),
            SyncOp::Shfl {
                mode,
                dst,
                src,
                b,
                c,
            } => l.def(*dst).suffix(mode.word()).reg(*src).val(*b).int(*c),
            SyncOp::Ballot { dst, pred } => l.def(*dst).reg(*pred),
            SyncOp::Elect { dst } => l.def(*dst),
            SyncOp::Fence(_) | SyncOp::GridDepWait | SyncOp::GridDepLaunchDependents => l,
        },
        Op::Mbarrier(op) => match op {
            MbarrierOp::Init { bar, count } => l.at(*bar).val(*count),
            MbarrierOp::Arrive { bar } | MbarrierOp::ArriveCluster { bar } => l.at(*bar),
            MbarrierOp::ArriveExpectTx { bar, tx_bytes }
            | MbarrierOp::ExpectTx { bar, tx_bytes } => l.at(*bar).val(*tx_bytes),
            MbarrierOp::WaitParity { bar, parity }
            | MbarrierOp::WaitParityCluster { bar, parity } => l.at(*bar).val(*parity),
        },
        Op::Cluster(op) => match op {
            ClusterOp::Arrive { semantics } => l.suffix(semantics.word()),
            ClusterOp::Wait => l,
            ClusterOp::Mapa { dst, addr, rank } => l.def(*dst).val(*addr).val(*rank),
        },
        Op::Tcgen05(op) => match op {
            Tcgen05Op::Alloc { dst_smem, ncols } => l.at(*dst_smem).int(*ncols),
            Tcgen05Op::Dealloc { taddr, ncols } => l.val(*taddr).int(*ncols),
            Tcgen05Op::Mma {
                d_tmem,
                a_desc,
                b_desc,
                idesc,
                accumulate,
            } => l
                .at(*d_tmem)
                .val(*a_desc)
                .val(*b_desc)
                .val(*idesc)
                .val(*accumulate),
            Tcgen05Op::Commit { mbar } => l.at(*mbar),
            Tcgen05Op::Ld32x32b { dst, taddr } => l.defs(dst).at(*taddr),
            Tcgen05Op::St32x32b { src, taddr } => l.at(*taddr).list(src),
            Tcgen05Op::RelinquishAllocPermit
            | Tcgen05Op::WaitLd
            | Tcgen05Op::WaitSt
            | Tcgen05Op::FenceBeforeThreadSync
            | Tcgen05Op::FenceAfterThreadSync => l,
        },
        Op::Wgmma(op) => match op {
            WgmmaOp::MmaAsync {
                n,
                acc,
                a_desc,
                b_desc,
                scale_d,
                trans_a,
                trans_b,
            } => l
                .suffix(format!("m64n{n}k16"))
                .list(acc)
                .val(*a_desc)
                .val(*b_desc)
                .val(*scale_d)
                .int(*trans_a)
                .int(*trans_b),
            WgmmaOp::MmaAsyncRs {
                n,
                acc,
                a,
                b_desc,
                scale_d,
                trans_b,
            } => l
                .suffix(format!("m64n{n}k16"))
                .list(acc)
                .list(a)
                .val(*b_desc)
                .val(*scale_d)
                .int(*trans_b),
            WgmmaOp::WaitGroup { n } => l.int(*n),
            WgmmaOp::Fence | WgmmaOp::CommitGroup => l,
        },
    }
}

fn unary(op: UnaryOp, line: &Line) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let ty = r.word()?;
    let a = r.operand()?;
    r.end(true, false)?;
    Ok(Op::Alu(AluOp::Unary {
        op,
        ty,
        dst: r.def()?,
        a,
    }))
}

fn binary(op: BinaryOp, line: &Line) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let ty = r.word()?;
    let a = r.operand()?;
    let b = r.operand()?;
    r.end(true, false)?;
    Ok(Op::Alu(AluOp::Binary {
        op,
        ty,
        dst: r.def()?,
        a,
        b,
    }))
}

/// `op` with a destination and two f32 halves.
fn pair(line: &Line, make: fn(Reg, Operand, Operand) -> CvtOp) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let lo = r.operand()?;
    let hi = r.operand()?;
    r.end(true, false)?;
    Ok(Op::Cvt(make(r.def()?, lo, hi)))
}

/// An op with one destination and one source register.
fn unary_reg(line: &Line, make: fn(Reg, Reg) -> Op) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let src = r.reg()?;
    r.end(true, false)?;
    Ok(make(r.def()?, src))
}

/// An op with no operands.
fn bare(line: &Line, op: Op) -> Result<Op, ParseError> {
    line.reader().end(false, false)?;
    Ok(op)
}

fn bf16x2(op: Bf16x2Arith, line: &Line) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let (a, b, c) = (r.operand()?, r.operand()?, r.operand()?);
    r.end(true, false)?;
    Ok(Op::Cvt(CvtOp::Bf16x2 {
        op,
        dst: r.def()?,
        a,
        b,
        c,
    }))
}

fn param_index(
    r: &super::line::Reader<'_>,
    params: &[Param],
    name: &str,
) -> Result<u32, ParseError> {
    params
        .iter()
        .position(|p| p.name == name)
        .map(|i| i as u32)
        .ok_or_else(|| r.err(format!("no parameter is named `{name}`")))
}

/// The `m64n{n}k16` shape suffix of a wgmma.
fn wgmma_n(r: &mut super::line::Reader<'_>) -> Result<u32, ParseError> {
    let s = r.raw_suffix("a shape suffix `m64nNk16`")?;
    s.strip_prefix("m64n")
        .and_then(|s| s.strip_suffix("k16"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| r.err(format!("`{s}` is not a wgmma shape `m64nNk16`")))
}

/// The op a parsed line stands for; `params` resolves parameter names.
pub(crate) fn build(line: &Line, params: &[Param]) -> Result<Op, ParseError> {
    let mut r = line.reader();
    let op = match line.kind {
        OpKind::Mov => {
            let src = r.operand()?;
            r.end(true, false)?;
            Op::Alu(AluOp::Mov { dst: r.def()?, src })
        }
        OpKind::Neg => return unary(UnaryOp::Neg, line),
        OpKind::Not => return unary(UnaryOp::Not, line),
        OpKind::Abs => return unary(UnaryOp::Abs, line),
        OpKind::Ex2Approx => return unary(UnaryOp::Ex2Approx, line),
        OpKind::Rcp => return unary(UnaryOp::Rcp, line),
        OpKind::Add => return binary(BinaryOp::Add, line),
        OpKind::Sub => return binary(BinaryOp::Sub, line),
        OpKind::Mul => return binary(BinaryOp::Mul, line),
        OpKind::MulHi => return binary(BinaryOp::MulHi, line),
        OpKind::Div => return binary(BinaryOp::Div, line),
        OpKind::Rem => return binary(BinaryOp::Rem, line),
        OpKind::Min => return binary(BinaryOp::Min, line),
        OpKind::Max => return binary(BinaryOp::Max, line),
        OpKind::And => return binary(BinaryOp::And, line),
        OpKind::Or => return binary(BinaryOp::Or, line),
        OpKind::Xor => return binary(BinaryOp::Xor, line),
        OpKind::Shl => return binary(BinaryOp::Shl, line),
        OpKind::Shr => return binary(BinaryOp::Shr, line),
        OpKind::MulWide => {
            let ty = r.word()?;
            let (a, b) = (r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Alu(AluOp::MulWide {
                ty,
                dst: r.def()?,
                a,
                b,
            })
        }
        OpKind::Fma => {
            let ty = r.word()?;
            let (a, b, c) = (r.operand()?, r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Alu(AluOp::Fma {
                ty,
                dst: r.def()?,
                a,
                b,
                c,
            })
        }
        OpKind::Setp => {
            let cmp: CmpOp = r.word()?;
            let ty = r.word()?;
            let (a, b) = (r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Alu(AluOp::Setp {
                cmp,
                ty,
                dst: r.def()?,
                a,
                b,
            })
        }
        OpKind::Selp => {
            let ty = r.word()?;
            let (a, b, cond) = (r.operand()?, r.operand()?, r.reg()?);
            r.end(true, false)?;
            Op::Alu(AluOp::Selp {
                ty,
                dst: r.def()?,
                a,
                b,
                cond,
            })
        }
        OpKind::Convert => {
            let rounding: Rounding = r.word()?;
            let dst_ty = r.word()?;
            let src_ty = r.word()?;
            let src = r.operand()?;
            r.end(true, false)?;
            Op::Alu(AluOp::Convert {
                dst_ty,
                src_ty,
                rounding,
                dst: r.def()?,
                src,
            })
        }
        OpKind::BitCast => {
            return unary_reg(line, |dst, src| Op::Alu(AluOp::BitCast { dst, src }));
        }
        OpKind::Pack => {
            let (lo, hi) = (r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Alu(AluOp::Pack {
                dst: r.def()?,
                lo,
                hi,
            })
        }
        OpKind::Unpack => {
            let src = r.reg()?;
            r.end(true, false)?;
            match r.defs()?[..] {
                [lo, hi] => Op::Alu(AluOp::Unpack { lo, hi, src }),
                _ => {
                    return Err(
                        r.err("`unpack` defines two registers: `%lo, %hi = unpack %s`".into())
                    );
                }
            }
        }
        OpKind::Prmt => {
            let (a, b, selector) = (r.operand()?, r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Alu(AluOp::Prmt {
                dst: r.def()?,
                a,
                b,
                selector,
            })
        }
        OpKind::F32x2ToBf16x2 => {
            return pair(line, |dst, lo, hi| CvtOp::F32x2ToBf16x2 { dst, lo, hi });
        }
        OpKind::F32x2ToE4m3x2 => {
            return pair(line, |dst, lo, hi| CvtOp::F32x2ToE4m3x2 { dst, lo, hi });
        }
        OpKind::F32x2ToUe8m0x2 => {
            return pair(line, |dst, lo, hi| CvtOp::F32x2ToUe8m0x2 { dst, lo, hi });
        }
        OpKind::E4m3x2ToF16x2 => {
            return unary_reg(line, |dst, src| Op::Cvt(CvtOp::E4m3x2ToF16x2 { dst, src }));
        }
        OpKind::Ue8m0x2ToBf16x2 => {
            return unary_reg(line, |dst, src| {
                Op::Cvt(CvtOp::Ue8m0x2ToBf16x2 { dst, src })
            });
        }
        OpKind::F16ToF32 => {
            return unary_reg(line, |dst, src| Op::Cvt(CvtOp::F16ToF32 { dst, src }));
        }
        OpKind::E2m1x2ToF16x2 => {
            let src = r.reg()?;
            let byte = r.int()?;
            r.end(true, false)?;
            Op::Cvt(CvtOp::E2m1x2ToF16x2 {
                dst: r.def()?,
                src,
                byte,
            })
        }
        OpKind::Bf16x2Mul => return bf16x2(Bf16x2Arith::Mul, line),
        OpKind::Bf16x2Fma => return bf16x2(Bf16x2Arith::Fma, line),
        OpKind::LdParam => {
            let name = r.name()?;
            let param = param_index(&r, params, name)?;
            let offset = r.int()?;
            r.end(true, false)?;
            Op::Mem(MemOp::LdParam {
                dst: r.def()?,
                param,
                offset,
            })
        }
        OpKind::CvtaGlobal => {
            return unary_reg(line, |dst, src| Op::Mem(MemOp::CvtaGlobal { dst, src }));
        }
        OpKind::SmemBase => {
            r.end(true, false)?;
            Op::Mem(MemOp::SmemBase { dst: r.def()? })
        }
        OpKind::ParamAddress => {
            let name = r.name()?;
            let param = param_index(&r, params, name)?;
            r.end(true, false)?;
            Op::Mem(MemOp::ParamAddress {
                dst: r.def()?,
                param,
            })
        }
        OpKind::Ld => {
            let space: Space = r.word()?;
            let cache = if r.flag("nc") {
                CacheHint::NonCoherent
            } else {
                CacheHint::Default
            };
            let ty: AccessTy = r.word()?;
            let (addr, offset) = r.addr()?;
            r.end(true, true)?;
            Op::Mem(MemOp::Ld {
                space,
                ty,
                dst: r.defs()?,
                addr,
                offset,
                cache,
                pred: r.pred(),
            })
        }
        OpKind::St => {
            let space: Space = r.word()?;
            let ty: AccessTy = r.word()?;
            let (addr, offset) = r.addr()?;
            let src = r.operands()?;
            r.end(false, true)?;
            Op::Mem(MemOp::St {
                space,
                ty,
                src,
                addr,
                offset,
                pred: r.pred(),
            })
        }
        OpKind::LdMatrix => {
            let trans = r.flag("trans");
            let addr = r.at()?;
            r.end(true, false)?;
            Op::Mem(MemOp::LdMatrix {
                dst: r.defs()?,
                addr,
                trans,
            })
        }
        OpKind::StMatrix => {
            let trans = r.flag("trans");
            let addr = r.at()?;
            let src = r.reg_list()?;
            r.end(false, false)?;
            Op::Mem(MemOp::StMatrix { src, addr, trans })
        }
        OpKind::AtomAdd => {
            let order: AtomOrder = r.word()?;
            let (addr, offset) = r.addr()?;
            let src = r.operand()?;
            r.end(true, false)?;
            Op::Mem(MemOp::AtomAdd {
                dst: r.def()?,
                addr,
                offset,
                src,
                order,
            })
        }
        OpKind::CpAsync => {
            let (dst, src, bytes) = (r.at()?, r.at()?, r.int()?);
            let src_bytes = if r.more() { Some(r.operand()?) } else { None };
            r.end(false, false)?;
            Op::Copy(CopyOp::CpAsync {
                dst,
                src,
                bytes,
                src_bytes,
            })
        }
        OpKind::CpAsyncCommit => return bare(line, Op::Copy(CopyOp::CpAsyncCommit)),
        OpKind::CpAsyncWait => {
            let n = r.int()?;
            r.end(false, false)?;
            Op::Copy(CopyOp::CpAsyncWait { n })
        }
        OpKind::BulkLoad => {
            let (dst, src, bytes, bar) = (r.at()?, r.at()?, r.operand()?, r.at()?);
            r.end(false, false)?;
            Op::Copy(CopyOp::BulkLoad {
                dst,
                src,
                bytes,
                bar,
            })
        }
        OpKind::StoreAsync => {
            let (dst, src, bar) = (r.at()?, r.operands()?, r.at()?);
            r.end(false, false)?;
            Op::Copy(CopyOp::StoreAsync { dst, src, bar })
        }
        OpKind::TensorLoad => {
            let (dst, map, coords, bar) = (r.at()?, r.reg()?, r.list()?, r.at()?);
            let multicast = if r.more() { Some(r.operand()?) } else { None };
            r.end(false, false)?;
            Op::Copy(CopyOp::TensorLoad {
                dst,
                map,
                coords,
                bar,
                multicast,
            })
        }
        OpKind::TensorStore => {
            let (map, coords, src) = (r.reg()?, r.list()?, r.at()?);
            r.end(false, false)?;
            Op::Copy(CopyOp::TensorStore { src, map, coords })
        }
        OpKind::BulkCommit => return bare(line, Op::Copy(CopyOp::BulkCommit)),
        OpKind::BulkWaitGroup => {
            let until = if r.flag("read") {
                BulkWait::Read
            } else {
                BulkWait::Written
            };
            let n = r.int()?;
            r.end(false, false)?;
            Op::Copy(CopyOp::BulkWaitGroup { n, until })
        }
        OpKind::PrefetchTensorMap => {
            let map = r.reg()?;
            r.end(false, false)?;
            Op::Copy(CopyOp::PrefetchTensorMap { map })
        }
        OpKind::BulkPrefetchL2 => {
            let (src, bytes) = (r.at()?, r.operand()?);
            r.end(false, false)?;
            Op::Copy(CopyOp::BulkPrefetchL2 { src, bytes })
        }
        OpKind::ReadSpecial => {
            let name = r.name()?;
            let reg = SpecialReg::from_word(name).ok_or_else(|| {
                r.err(format!(
                    "`{name}` is not {} (one of {})",
                    SpecialReg::WHAT,
                    SpecialReg::WORDS.join(", ")
                ))
            })?;
            r.end(true, false)?;
            Op::Sync(SyncOp::ReadSpecial { dst: r.def()?, reg })
        }
        OpKind::BarSync => {
            let id = r.int()?;
            r.end(false, false)?;
            Op::Sync(SyncOp::BarSync { id })
        }
        OpKind::NamedBarSync | OpKind::NamedBarArrive => {
            let (id, threads) = (r.int()?, r.int()?);
            r.end(false, false)?;
            Op::Sync(SyncOp::NamedBarrier {
                id,
                threads,
                wait: line.kind == OpKind::NamedBarSync,
            })
        }
        OpKind::SetMaxNregInc | OpKind::SetMaxNregDec => {
            let regs = r.int()?;
            r.end(false, false)?;
            Op::Sync(SyncOp::SetMaxNreg {
                regs,
                increase: line.kind == OpKind::SetMaxNregInc,
            })
        }
        OpKind::Shfl => {
            let mode: ShflMode = r.word()?;
            let (src, b, c) = (r.reg()?, r.operand()?, r.int()?);
            r.end(true, false)?;
            Op::Sync(SyncOp::Shfl {
                mode,
                dst: r.def()?,
                src,
                b,
                c,
            })
        }
        OpKind::Ballot => {
            return unary_reg(line, |dst, pred| Op::Sync(SyncOp::Ballot { dst, pred }));
        }
        OpKind::Elect => {
            r.end(true, false)?;
            Op::Sync(SyncOp::Elect { dst: r.def()? })
        }
        OpKind::FenceProxyAsync => {
            return bare(
                line,
                Op::Sync(SyncOp::Fence(FenceKind::ProxyAsyncSharedCta)),
            );
        }
        OpKind::FenceAcqRelCluster => {
            return bare(line, Op::Sync(SyncOp::Fence(FenceKind::AcqRelCluster)));
        }
        OpKind::FenceAcqRelGpu => {
            return bare(line, Op::Sync(SyncOp::Fence(FenceKind::AcqRelGpu)));
        }
        OpKind::FenceMbarrierInit => {
            return bare(line, Op::Sync(SyncOp::Fence(FenceKind::MbarrierInit)));
        }
        OpKind::GridDepWait => return bare(line, Op::Sync(SyncOp::GridDepWait)),
        OpKind::GridDepLaunchDependents => {
            return bare(line, Op::Sync(SyncOp::GridDepLaunchDependents));
        }
        OpKind::MbarrierInit => {
            let (bar, count) = (r.at()?, r.operand()?);
            r.end(false, false)?;
            Op::Mbarrier(MbarrierOp::Init { bar, count })
        }
        OpKind::MbarrierArrive | OpKind::MbarrierArriveCluster => {
            let bar = r.at()?;
            r.end(false, false)?;
            if line.kind == OpKind::MbarrierArrive {
                Op::Mbarrier(MbarrierOp::Arrive { bar })
            } else {
                Op::Mbarrier(MbarrierOp::ArriveCluster { bar })
            }
        }
        OpKind::MbarrierArriveExpectTx | OpKind::MbarrierExpectTx => {
            let (bar, tx_bytes) = (r.at()?, r.operand()?);
            r.end(false, false)?;
            if line.kind == OpKind::MbarrierExpectTx {
                Op::Mbarrier(MbarrierOp::ExpectTx { bar, tx_bytes })
            } else {
                Op::Mbarrier(MbarrierOp::ArriveExpectTx { bar, tx_bytes })
            }
        }
        OpKind::MbarrierWaitParity | OpKind::MbarrierWaitParityCluster => {
            let (bar, parity) = (r.at()?, r.operand()?);
            r.end(false, false)?;
            if line.kind == OpKind::MbarrierWaitParity {
                Op::Mbarrier(MbarrierOp::WaitParity { bar, parity })
            } else {
                Op::Mbarrier(MbarrierOp::WaitParityCluster { bar, parity })
            }
        }
        OpKind::ClusterArrive => {
            let semantics: ArriveSemantics = r.word()?;
            r.end(false, false)?;
            Op::Cluster(ClusterOp::Arrive { semantics })
        }
        OpKind::ClusterWait => return bare(line, Op::Cluster(ClusterOp::Wait)),
        OpKind::Mapa => {
            let (addr, rank) = (r.operand()?, r.operand()?);
            r.end(true, false)?;
            Op::Cluster(ClusterOp::Mapa {
                dst: r.def()?,
                addr,
                rank,
            })
        }
        OpKind::TmemAlloc => {
            let (dst_smem, ncols) = (r.at()?, r.int()?);
            r.end(false, false)?;
            Op::Tcgen05(Tcgen05Op::Alloc { dst_smem, ncols })
        }
        OpKind::TmemRelinquish => return bare(line, Op::Tcgen05(Tcgen05Op::RelinquishAllocPermit)),
        OpKind::TmemDealloc => {
            let (taddr, ncols) = (r.operand()?, r.int()?);
            r.end(false, false)?;
            Op::Tcgen05(Tcgen05Op::Dealloc { taddr, ncols })
        }
        OpKind::Tcgen05Mma => {
            let d_tmem = r.at()?;
            let (a_desc, b_desc, idesc, accumulate) =
                (r.operand()?, r.operand()?, r.operand()?, r.operand()?);
            r.end(false, false)?;
            Op::Tcgen05(Tcgen05Op::Mma {
                d_tmem,
                a_desc,
                b_desc,
                idesc,
                accumulate,
            })
        }
        OpKind::Tcgen05Commit => {
            let mbar = r.at()?;
            r.end(false, false)?;
            Op::Tcgen05(Tcgen05Op::Commit { mbar })
        }
        OpKind::TmemLd => {
            let taddr = r.at()?;
            r.end(true, false)?;
            Op::Tcgen05(Tcgen05Op::Ld32x32b {
                dst: r.defs()?,
                taddr,
            })
        }
        OpKind::TmemWaitLd => return bare(line, Op::Tcgen05(Tcgen05Op::WaitLd)),
        OpKind::TmemSt => {
            let (taddr, src) = (r.at()?, r.reg_list()?);
            r.end(false, false)?;
            Op::Tcgen05(Tcgen05Op::St32x32b { src, taddr })
        }
        OpKind::TmemWaitSt => return bare(line, Op::Tcgen05(Tcgen05Op::WaitSt)),
        OpKind::Tcgen05FenceBefore => {
            return bare(line, Op::Tcgen05(Tcgen05Op::FenceBeforeThreadSync));
        }
        OpKind::Tcgen05FenceAfter => {
            return bare(line, Op::Tcgen05(Tcgen05Op::FenceAfterThreadSync));
        }
        OpKind::WgmmaFence => return bare(line, Op::Wgmma(WgmmaOp::Fence)),
        OpKind::WgmmaMma => {
            let n = wgmma_n(&mut r)?;
            let acc = r.reg_list()?;
            let (a_desc, b_desc, scale_d) = (r.operand()?, r.operand()?, r.operand()?);
            let (trans_a, trans_b) = (r.int()?, r.int()?);
            r.end(false, false)?;
            Op::Wgmma(WgmmaOp::MmaAsync {
                n,
                acc,
                a_desc,
                b_desc,
                scale_d,
                trans_a,
                trans_b,
            })
        }
        OpKind::WgmmaMmaRs => {
            let n = wgmma_n(&mut r)?;
            let acc = r.reg_list()?;
            let a: [Reg; 4] = r
                .reg_list()?
                .try_into()
                .map_err(|_| r.err("the A fragment is four registers".into()))?;
            let (b_desc, scale_d, trans_b) = (r.operand()?, r.operand()?, r.int()?);
            r.end(false, false)?;
            Op::Wgmma(WgmmaOp::MmaAsyncRs {
                n,
                acc,
                a,
                b_desc,
                scale_d,
                trans_b,
            })
        }
        OpKind::WgmmaCommit => return bare(line, Op::Wgmma(WgmmaOp::CommitGroup)),
        OpKind::WgmmaWait => {
            let n = r.int()?;
            r.end(false, false)?;
            Op::Wgmma(WgmmaOp::WaitGroup { n })
        }
    };
    Ok(op)
}
