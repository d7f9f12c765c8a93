//! Operand rules of each op: counts, register widths and types, immediates, shapes.

use std::collections::HashMap;

use super::rules;
use crate::ir::{
    AccessTy, AluOp, BinaryOp, CacheHint, ClusterOp, CopyOp, CvtOp, Kernel, MbarrierOp, MemOp, Op,
    Operand, ParamKind, Reg, Space, SyncOp, Tcgen05Op, Ty, WgmmaOp,
};

/// Every broken operand rule of `op`, as messages. `maps` holds the registers written by
/// `cvta.param` and the parameter each came from.
pub(super) fn check(k: &Kernel, maps: &HashMap<Reg, u32>, op: &Op) -> Vec<String> {
    let mut c = Cx {
        k,
        maps,
        out: Vec::new(),
    };
    match op {
        Op::Alu(op) => c.alu(op),
        Op::Cvt(op) => c.cvt(op),
        Op::Mem(op) => c.mem(op),
        Op::Copy(op) => c.copy(op),
        Op::Sync(op) => c.sync(op),
        Op::Mbarrier(op) => c.mbarrier(op),
        Op::Cluster(op) => c.cluster(op),
        Op::Tcgen05(op) => c.tcgen05(op),
        Op::Wgmma(op) => c.wgmma(op),
    }
    c.out
}

struct Cx<'a> {
    k: &'a Kernel,
    maps: &'a HashMap<Reg, u32>,
    out: Vec<String>,
}

impl Cx<'_> {
    fn rule(&mut self, r: Result<(), String>) {
        if let Err(e) = r {
            self.out.push(e);
        }
    }

    fn ty(&self, r: Reg) -> Ty {
        self.k.reg_ty(r)
    }

    /// `r` is a `bits`-wide register (predicates are never data).
    fn reg_bits(&mut self, r: Reg, bits: u32, what: &str) {
        let ty = self.ty(r);
        if ty.bits() != bits || (ty == Ty::Pred) != (bits == 1) {
            self.out.push(format!(
                "{what} is register #{} of type {}; it must be a {bits}-bit register",
                r.0,
                ty.ptx()
            ));
        }
    }

    /// A register operand is `bits` wide; an immediate takes the op's width.
    fn opnd_bits(&mut self, o: &Operand, bits: u32, what: &str) {
        if let Operand::Reg(r) = o {
            self.reg_bits(*r, bits, what);
        }
    }

    fn reg_ty(&mut self, r: Reg, want: Ty, what: &str) {
        let ty = self.ty(r);
        if ty != want {
            self.out.push(format!(
                "{what} is register #{} of type {}; it must be a {}",
                r.0,
                ty.ptx(),
                want.ptx()
            ));
        }
    }

    /// A predicate register, or an immediate 0 or 1.
    fn opnd_pred(&mut self, o: &Operand, what: &str) {
        match o {
            Operand::Reg(r) => self.reg_ty(*r, Ty::Pred, what),
            Operand::Imm(v) if *v > 1 => self.out.push(format!(
                "{what} is the immediate {v}; a predicate is 0 or 1"
            )),
            Operand::Imm(_) => {}
        }
    }

    /// A 32-bit shared-memory address.
    fn smem(&mut self, o: &Operand, what: &str) {
        self.opnd_bits(o, 32, &format!("{what} (a shared-memory address)"));
    }

    /// A 64-bit global address.
    fn gmem(&mut self, o: &Operand, what: &str) {
        self.opnd_bits(o, 64, &format!("{what} (a global address)"));
    }

    /// The byte count of a 1-D bulk operation: a 32-bit register, or an immediate that is
    /// a positive multiple of 16.
    fn bulk_bytes(&mut self, o: &Operand) {
        match o {
            Operand::Imm(n) => self.rule(rules::bulk_bytes(*n)),
            Operand::Reg(_) => self.opnd_bits(o, 32, "the byte count"),
        }
    }

    fn alu(&mut self, op: &AluOp) {
        match op {
            AluOp::Mov { dst, src } => {
                let bits = self.ty(*dst).bits();
                self.opnd_bits(src, bits, "the source");
            }
            AluOp::Unary { op, ty, dst, a } => {
                self.rule(rules::unary_ty(*op, *ty));
                self.opnd_bits(a, ty.bits(), "operand a");
                self.reg_bits(*dst, ty.bits(), "the destination");
            }
            AluOp::Binary { op, ty, dst, a, b } => {
                self.rule(rules::binary_ty(*op, *ty));
                self.opnd_bits(a, ty.bits(), "operand a");
                // Shift amounts are u32 whatever the shifted type.
                let b_bits = match op {
                    BinaryOp::Shl | BinaryOp::Shr => 32,
                    _ => ty.bits(),
                };
                self.opnd_bits(b, b_bits, "operand b");
                self.reg_bits(*dst, ty.bits(), "the destination");
            }
            AluOp::MulWide { ty, dst, a, b } => {
                self.rule(rules::mul_wide_ty(*ty));
                self.opnd_bits(a, 32, "operand a");
                self.opnd_bits(b, 32, "operand b");
                self.reg_bits(*dst, 64, "the destination");
            }
            AluOp::Fma { ty, dst, a, b, c } => {
                self.rule(rules::fma_ty(*ty));
                for (o, what) in [(a, "operand a"), (b, "operand b"), (c, "operand c")] {
                    self.opnd_bits(o, ty.bits(), what);
                }
                self.reg_bits(*dst, ty.bits(), "the destination");
            }
            AluOp::Setp { ty, dst, a, b, .. } => {
                self.rule(rules::setp_ty(*ty));
                self.opnd_bits(a, ty.bits(), "operand a");
                self.opnd_bits(b, ty.bits(), "operand b");
                self.reg_ty(*dst, Ty::Pred, "the destination");
            }
            AluOp::Selp {
                ty,
                dst,
                a,
                b,
                cond,
            } => {
                self.opnd_bits(a, ty.bits(), "operand a");
                self.opnd_bits(b, ty.bits(), "operand b");
                self.reg_ty(*cond, Ty::Pred, "the condition");
                self.reg_bits(*dst, ty.bits(), "the destination");
            }
            AluOp::Convert {
                dst_ty,
                src_ty,
                dst,
                src,
                ..
            } => {
                self.rule(rules::convert_tys(*dst_ty, *src_ty));
                self.opnd_bits(src, src_ty.bits(), "the source");
                self.reg_bits(*dst, dst_ty.bits(), "the destination");
            }
            AluOp::BitCast { dst, src } => {
                let bits = self.ty(*dst).bits();
                self.reg_bits(*src, bits, "the source");
            }
            AluOp::Pack { dst, lo, hi } => match self.ty(*dst).bits() {
                bits @ (32 | 64) if self.ty(*dst) != Ty::F32 => {
                    self.opnd_bits(lo, bits / 2, "the low half");
                    self.opnd_bits(hi, bits / 2, "the high half");
                }
                _ => self.reg_bits(*dst, 32, "the destination (b32 or b64)"),
            },
            AluOp::Unpack { lo, hi, src } => match self.ty(*src).bits() {
                bits @ (32 | 64) if self.ty(*src) != Ty::F32 => {
                    self.reg_bits(*lo, bits / 2, "the low half");
                    self.reg_bits(*hi, bits / 2, "the high half");
                }
                _ => self.reg_bits(*src, 32, "the source (b32 or b64)"),
            },
            AluOp::Prmt {
                dst,
                a,
                b,
                selector,
            } => {
                self.reg_bits(*dst, 32, "the destination");
                for (o, what) in [
                    (a, "operand a"),
                    (b, "operand b"),
                    (selector, "the selector"),
                ] {
                    self.opnd_bits(o, 32, what);
                }
            }
        }
    }

    fn cvt(&mut self, op: &CvtOp) {
        match op {
            CvtOp::F32x2ToBf16x2 { dst, lo, hi }
            | CvtOp::F32x2ToE4m3x2 { dst, lo, hi }
            | CvtOp::F32x2ToUe8m0x2 { dst, lo, hi } => {
                for (o, what) in [(lo, "the low element"), (hi, "the high element")] {
                    if let Operand::Reg(r) = o {
                        self.reg_ty(*r, Ty::F32, what);
                    }
                }
                let bits = if matches!(op, CvtOp::F32x2ToBf16x2 { .. }) {
                    32
                } else {
                    16
                };
                self.reg_bits(*dst, bits, "the destination");
            }
            CvtOp::E4m3x2ToF16x2 { dst, src } | CvtOp::Ue8m0x2ToBf16x2 { dst, src } => {
                self.reg_bits(*src, 16, "the source");
                self.reg_bits(*dst, 32, "the destination");
            }
            CvtOp::E2m1x2ToF16x2 { dst, src, byte } => {
                self.rule(rules::e2m1_byte(*byte));
                self.reg_bits(*src, 32, "the source");
                self.reg_bits(*dst, 32, "the destination");
            }
            CvtOp::F16ToF32 { dst, src } => {
                self.reg_bits(*src, 16, "the source");
                self.reg_ty(*dst, Ty::F32, "the destination");
            }
            CvtOp::Bf16x2 { dst, a, b, c, .. } => {
                self.reg_bits(*dst, 32, "the destination");
                for (o, what) in [(a, "operand a"), (b, "operand b"), (c, "operand c")] {
                    self.opnd_bits(o, 32, what);
                }
            }
        }
    }

    /// The register widths an access of `ty` moves through.
    fn access_reg(&mut self, r: Reg, ty: AccessTy, what: &str) {
        let bits = self.ty(r).bits();
        let ok = match ty {
            // Narrow loads widen into 16- or 32-bit registers.
            AccessTy::U8 | AccessTy::U16 => matches!(bits, 16 | 32),
            AccessTy::B32 => bits == 32,
            AccessTy::B64 => bits == 64,
        } && self.ty(r) != Ty::Pred;
        if !ok {
            self.out.push(format!(
                "{what} is register #{} of type {}, which a .{} access cannot move",
                r.0,
                self.ty(r).ptx(),
                ty.ptx()
            ));
        }
    }

    /// A store's values: 1, 2 or 4, each register one a `ty` access moves.
    fn stored_values(&mut self, src: &[Operand], ty: AccessTy) {
        self.rule(rules::vector_width(src.len()));
        for s in src {
            if let Operand::Reg(r) = s {
                self.access_reg(*r, ty, "a source");
            }
        }
    }

    fn address(&mut self, space: Space, addr: &Operand) {
        match space {
            Space::Global => self.gmem(addr, "the address"),
            Space::Shared | Space::SharedCluster => self.smem(addr, "the address"),
        }
    }

    fn param(&mut self, param: u32) -> Option<ParamKind> {
        match self.k.params.get(param as usize) {
            Some(p) => Some(p.kind),
            None => {
                self.out.push(format!(
                    "parameter #{param} does not exist (the kernel has {})",
                    self.k.params.len()
                ));
                None
            }
        }
    }

    fn mem(&mut self, op: &MemOp) {
        match op {
            MemOp::LdParam { dst, param, offset } => {
                if let Some(kind) = self.param(*param) {
                    let bytes = (self.ty(*dst).bits() / 8).max(1);
                    let size = kind.bytes() as u32;
                    if offset.checked_add(bytes).is_none_or(|end| end > size) {
                        let name = &self.k.params[*param as usize].name;
                        self.out.push(format!(
                            "bytes [{offset}, {}) of parameter `{name}` of {size} bytes",
                            *offset as u64 + bytes as u64
                        ));
                    }
                }
            }
            MemOp::CvtaGlobal { dst, src } => {
                self.reg_bits(*src, 64, "the source");
                self.reg_bits(*dst, 64, "the destination");
            }
            MemOp::SmemBase { dst } => self.reg_bits(*dst, 32, "the destination"),
            MemOp::LdMatrix { dst, addr, .. } => {
                self.matrix("ldmatrix", dst, addr, "a destination")
            }
            MemOp::StMatrix { src, addr, .. } => self.matrix("stmatrix", src, addr, "a source"),
            MemOp::ParamAddress { dst, param } => {
                if let Some(kind) = self.param(*param)
                    && !matches!(kind, ParamKind::TensorMap { .. })
                {
                    let name = &self.k.params[*param as usize].name;
                    self.out.push(format!(
                        "parameter `{name}` is not a tensor map; only tensor maps are read \
                         through their parameter-space address"
                    ));
                }
                self.reg_bits(*dst, 64, "the destination");
            }
            MemOp::Ld {
                space,
                ty,
                dst,
                addr,
                cache,
                pred,
                ..
            } => {
                self.rule(rules::vector_width(dst.len()));
                for d in dst {
                    self.access_reg(*d, *ty, "a destination");
                }
                self.address(*space, addr);
                if *cache == CacheHint::NonCoherent && *space != Space::Global {
                    self.out
                        .push("the read-only (.nc) path exists for global loads only".into());
                }
                if let Some(p) = pred {
                    self.reg_ty(*p, Ty::Pred, "the predicate");
                }
            }
            MemOp::St {
                space,
                ty,
                src,
                addr,
                pred,
                ..
            } => {
                self.stored_values(src, *ty);
                self.address(*space, addr);
                if let Some(p) = pred {
                    self.reg_ty(*p, Ty::Pred, "the predicate");
                }
            }
            MemOp::AtomAdd { dst, addr, src, .. } => {
                self.access_reg(*dst, AccessTy::B32, "the destination");
                self.stored_values(std::slice::from_ref(src), AccessTy::B32);
                self.address(Space::Global, addr);
            }
        }
    }

    /// The map operand of a TMA op, and its coordinates against the map's rank.
    fn tensor_map(&mut self, map: Reg, coords: Option<&[Operand]>) {
        let rank = match self.maps.get(&map) {
            Some(&p) => match self.k.params[p as usize].kind {
                ParamKind::TensorMap { rank, .. } => Some(rank as usize),
                _ => None,
            },
            None => None,
        };
        if rank.is_none() {
            self.out.push(format!(
                "the tensor map operand is register #{}, which does not hold the address of a \
                 tensor-map parameter: pass the `cvta.param` of a `TensorMap` parameter",
                map.0
            ));
        }
        let Some(coords) = coords else { return };
        if let Err(e) = rules::tensor_map_rank(coords.len()) {
            self.out.push(format!("{} coordinates: {e}", coords.len()));
        } else if let Some(rank) = rank
            && rank != coords.len()
        {
            self.out.push(format!(
                "{} coordinates for a rank-{rank} tensor map: give one per dimension",
                coords.len()
            ));
        }
        for c in coords {
            self.opnd_bits(c, 32, "a coordinate");
        }
    }

    fn copy(&mut self, op: &CopyOp) {
        match op {
            CopyOp::CpAsync {
                dst,
                src,
                bytes,
                src_bytes,
            } => {
                self.rule(rules::cp_async_bytes(*bytes));
                self.smem(dst, "the destination");
                self.gmem(src, "the source");
                match src_bytes {
                    Some(Operand::Imm(n)) if *n > *bytes as u64 => self.out.push(format!(
                        "reads {n} source bytes of a {bytes}-byte copy: at most {bytes}"
                    )),
                    Some(o) => self.opnd_bits(o, 32, "the source byte count"),
                    None => {}
                }
            }
            CopyOp::BulkLoad {
                dst,
                src,
                bytes,
                bar,
            } => {
                self.bulk_bytes(bytes);
                self.smem(dst, "the destination");
                self.gmem(src, "the source");
                self.smem(bar, "the mbarrier");
            }
            CopyOp::StoreAsync { dst, src, bar } => {
                self.stored_values(src, AccessTy::B32);
                self.smem(dst, "the destination");
                self.smem(bar, "the mbarrier");
            }
            CopyOp::TensorLoad {
                dst,
                map,
                coords,
                bar,
                multicast,
            } => {
                self.tensor_map(*map, Some(coords));
                self.smem(dst, "the destination");
                self.smem(bar, "the mbarrier");
                match multicast {
                    Some(Operand::Imm(m)) if *m > 0xffff => self.out.push(format!(
                        "multicast mask {m:#x}: a cluster has at most 16 CTAs (16 bits)"
                    )),
                    Some(o) => self.opnd_bits(o, 16, "the multicast mask"),
                    None => {}
                }
            }
            CopyOp::TensorStore { src, map, coords } => {
                self.tensor_map(*map, Some(coords));
                self.smem(src, "the source");
            }
            CopyOp::PrefetchTensorMap { map } => self.tensor_map(*map, None),
            CopyOp::BulkPrefetchL2 { src, bytes } => {
                self.bulk_bytes(bytes);
                self.gmem(src, "the source");
            }
            CopyOp::CpAsyncCommit
            | CopyOp::CpAsyncWait { .. }
            | CopyOp::BulkCommit
            | CopyOp::BulkWaitGroup { .. } => {}
        }
    }

    fn sync(&mut self, op: &SyncOp) {
        match op {
            SyncOp::ReadSpecial { dst, .. } => self.reg_bits(*dst, 32, "the destination"),
            SyncOp::BarSync { id } => self.rule(rules::barrier_id(*id)),
            SyncOp::NamedBarrier { id, threads, .. } => {
                let cta = self.k.threads_per_cta();
                self.rule(rules::named_barrier(*id, *threads, cta));
            }
            SyncOp::SetMaxNreg { regs, .. } => self.rule(rules::setmaxnreg(*regs)),
            SyncOp::Shfl { dst, src, b, c, .. } => {
                self.reg_bits(*src, 32, "the source");
                self.reg_bits(*dst, 32, "the destination");
                self.opnd_bits(b, 32, "the lane operand");
                if let Operand::Imm(lane) = b
                    && *lane >= 32
                {
                    self.out
                        .push(format!("lane operand {lane}: a warp has lanes 0..32"));
                }
                if c & !0x1f1f != 0 {
                    self.out.push(format!(
                        "c operand {c:#x}: only the clamp (bits 4:0) and the segment mask \
                         (bits 12:8) exist"
                    ));
                }
            }
            SyncOp::Ballot { dst, pred } => {
                self.reg_ty(*pred, Ty::Pred, "the predicate");
                self.reg_bits(*dst, 32, "the destination");
            }
            SyncOp::Elect { dst } => self.reg_ty(*dst, Ty::Pred, "the destination"),
            SyncOp::Fence(_) | SyncOp::GridDepWait | SyncOp::GridDepLaunchDependents => {}
        }
    }

    fn mbarrier(&mut self, op: &MbarrierOp) {
        match op {
            MbarrierOp::Init { bar, count } => {
                self.smem(bar, "the mbarrier");
                self.opnd_bits(count, 32, "the arrival count");
                if let Operand::Imm(n) = count {
                    self.rule(rules::mbarrier_count("arrival count", *n, 1));
                }
            }
            MbarrierOp::Arrive { bar } | MbarrierOp::ArriveCluster { bar } => {
                self.smem(bar, "the mbarrier")
            }
            MbarrierOp::ArriveExpectTx { bar, tx_bytes }
            | MbarrierOp::ExpectTx { bar, tx_bytes } => {
                self.smem(bar, "the mbarrier");
                self.opnd_bits(tx_bytes, 32, "the transaction bytes");
                if let Operand::Imm(n) = tx_bytes {
                    self.rule(rules::mbarrier_count("transaction count", *n, 0));
                }
            }
            MbarrierOp::WaitParity { bar, parity }
            | MbarrierOp::WaitParityCluster { bar, parity } => {
                self.smem(bar, "the mbarrier");
                self.opnd_bits(parity, 32, "the parity");
                if let Operand::Imm(p) = parity
                    && *p > 1
                {
                    self.out
                        .push(format!("parity {p}: a phase parity is 0 or 1"));
                }
            }
        }
    }

    fn cluster(&mut self, op: &ClusterOp) {
        if let ClusterOp::Mapa { dst, addr, rank } = op {
            self.reg_bits(*dst, 32, "the destination");
            self.smem(addr, "the address");
            self.opnd_bits(rank, 32, "the rank");
        }
    }

    fn tcgen05(&mut self, op: &Tcgen05Op) {
        match op {
            Tcgen05Op::Alloc { dst_smem, ncols } => {
                self.rule(rules::tmem_columns(*ncols));
                self.smem(dst_smem, "the destination");
            }
            Tcgen05Op::Dealloc { taddr, ncols } => {
                self.rule(rules::tmem_columns(*ncols));
                self.opnd_bits(taddr, 32, "the TMEM address");
            }
            Tcgen05Op::Mma {
                d_tmem,
                a_desc,
                b_desc,
                idesc,
                accumulate,
            } => {
                self.opnd_bits(d_tmem, 32, "the TMEM address of D");
                self.opnd_bits(a_desc, 64, "the A descriptor");
                self.opnd_bits(b_desc, 64, "the B descriptor");
                self.opnd_bits(idesc, 32, "the instruction descriptor");
                self.opnd_pred(accumulate, "the accumulate flag");
            }
            Tcgen05Op::Commit { mbar } => self.smem(mbar, "the mbarrier"),
            Tcgen05Op::Ld32x32b { dst, taddr } => {
                self.rule(rules::tcgen05_ld_columns(dst.len()));
                self.tmem_words(dst, taddr, "a destination");
            }
            Tcgen05Op::St32x32b { src, taddr } => {
                self.rule(rules::tcgen05_st_columns(src.len()));
                self.tmem_words(src, taddr, "a source");
            }
            Tcgen05Op::RelinquishAllocPermit
            | Tcgen05Op::WaitLd
            | Tcgen05Op::WaitSt
            | Tcgen05Op::FenceBeforeThreadSync
            | Tcgen05Op::FenceAfterThreadSync => {}
        }
    }

    /// What `tcgen05.ld` and `tcgen05.st` share: 32-bit words and a 32-bit TMEM address.
    fn tmem_words(&mut self, regs: &[Reg], taddr: &Operand, what: &str) {
        for r in regs {
            self.reg_bits(*r, 32, what);
        }
        self.opnd_bits(taddr, 32, "the TMEM address");
    }

    /// `ldmatrix` / `stmatrix`: 1, 2 or 4 b32 registers and a shared-memory address.
    fn matrix(&mut self, what: &str, regs: &[Reg], addr: &Operand, role: &str) {
        self.rule(rules::matrix_count(what, regs.len()));
        for r in regs {
            self.reg_bits(*r, 32, role);
        }
        self.smem(addr, "the row address");
    }

    fn wgmma(&mut self, op: &WgmmaOp) {
        match op {
            WgmmaOp::MmaAsync {
                n,
                acc,
                a_desc,
                b_desc,
                scale_d,
                trans_a,
                trans_b,
            } => {
                self.wgmma_common(*n, acc, b_desc, scale_d);
                self.rule(rules::wgmma_transpose(*trans_a, *trans_b));
                self.opnd_bits(a_desc, 64, "the A descriptor");
            }
            WgmmaOp::MmaAsyncRs {
                n,
                acc,
                a,
                b_desc,
                scale_d,
                trans_b,
            } => {
                self.wgmma_common(*n, acc, b_desc, scale_d);
                // A from registers is always K-major: only B has a transpose flag.
                self.rule(rules::wgmma_transpose(0, *trans_b));
                for r in a {
                    self.reg_bits(*r, 32, "an A fragment register");
                }
            }
            WgmmaOp::Fence | WgmmaOp::CommitGroup | WgmmaOp::WaitGroup { .. } => {}
        }
    }

    /// What the SS and RS forms share: N, the accumulator, B and scale-d.
    fn wgmma_common(&mut self, n: u32, acc: &[Reg], b_desc: &Operand, scale_d: &Operand) {
        match rules::wgmma_n(n) {
            Ok(()) => self.rule(rules::wgmma_accumulator(n, acc.len())),
            Err(e) => self.out.push(e),
        }
        for r in acc {
            self.reg_ty(*r, Ty::F32, "an accumulator register");
        }
        self.opnd_bits(b_desc, 64, "the B descriptor");
        self.opnd_pred(scale_d, "scale-d");
    }
}
