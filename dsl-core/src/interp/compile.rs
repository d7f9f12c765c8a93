//! IR -> a flat array of compact ops with resolved register slots and jump targets.
//!
//! Registers: the IR numbers its virtual registers densely and writes most of them once, so
//! a kernel has many thousands; each warp would need `regs x 32 x 8` bytes. Instead every
//! register gets a live interval over the linearised code (a loop stretches the interval of
//! anything used inside it but defined before it to the loop's end) and a linear scan packs
//! the intervals into slots, as a register allocator would. Immediates become constant
//! slots, filled once per warp, so every operand of every op is a slot: the hot loop never
//! asks "register or immediate?".

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::InterpError;
use super::alu::{Bin, Num, Tern, Un};
use super::cvt::Packed;
use crate::ir::{
    AccessTy, AluOp, Bf16x2Arith, BinaryOp, Block, ClusterOp, CmpOp, CopyOp, CvtOp, FenceKind,
    Inst, Kernel, MbarrierOp, MemOp, Op, Operand, Reg, Rounding, ShflMode, SourceLoc, Space,
    SpecialReg, Stmt, SyncOp, Tcgen05Op, Ty, UnaryOp, WgmmaOp,
};

/// An index into a warp's register file (slot-major: lane `l` of slot `s` is `s * 32 + l`).
pub(crate) type Slot = u32;
/// "No register" (an absent predicate or operand).
pub(crate) const NONE: Slot = u32::MAX;

/// A `wgmma.mma_async`: accumulator slots are `lists[list..list + n / 2]`; `a` is A's
/// descriptor or fragment, `b` holds B's descriptor and `scale` scale-d; `ta`, `tb` are the
/// transpose immediates (`ta` is 0 for A in registers, which is K-major).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WgMmaIns {
    pub(crate) n: u32,
    pub(crate) list: u32,
    pub(crate) a: WgA,
    pub(crate) b: Slot,
    pub(crate) scale: Slot,
    pub(crate) ta: u8,
    pub(crate) tb: u8,
}

/// Where a wgmma reads A.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WgA {
    /// A shared-memory descriptor (SS).
    Desc(Slot),
    /// Four b32 registers, `lists[list..list + 4]` (RS).
    Regs(u32),
}

/// One compiled op. Control flow is structured: `If`/`Else`/`EndIf` and
/// `LoopBegin`/`LoopTest`/`LoopEnd` carry each other's positions for the SIMT stack.
#[derive(Clone, Debug)]
pub(crate) enum Ins {
    Mov {
        d: Slot,
        a: Slot,
    },
    Un {
        op: Un,
        d: Slot,
        a: Slot,
    },
    Bin {
        op: Bin,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Tern {
        op: Tern,
        d: Slot,
        abc: [Slot; 3],
    },
    Setp {
        cmp: CmpOp,
        ty: Num,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Selp {
        d: Slot,
        a: Slot,
        b: Slot,
        p: Slot,
    },
    Convert {
        from: Num,
        to: Num,
        rnd: Rounding,
        d: Slot,
        a: Slot,
    },
    /// `mov.b32 d, {lo, hi}` (half = 16) or `mov.b64` (half = 32).
    Pack {
        half: u32,
        d: Slot,
        lo: Slot,
        hi: Slot,
    },
    Unpack {
        half: u32,
        lo: Slot,
        hi: Slot,
        a: Slot,
    },
    Prmt {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    Packed {
        op: Packed,
        d: Slot,
        abc: [Slot; 3],
    },
    LdParam {
        d: Slot,
        param: u32,
        offset: u32,
        bytes: u32,
    },
    Ld {
        space: Space,
        ty: AccessTy,
        n: u32,
        d: [Slot; 4],
        addr: Slot,
        offset: i32,
        pred: Slot,
    },
    St {
        space: Space,
        ty: AccessTy,
        n: u32,
        s: [Slot; 4],
        addr: Slot,
        offset: i32,
        pred: Slot,
    },
    AtomAdd {
        d: Slot,
        addr: Slot,
        offset: i32,
        s: Slot,
    },
    Special {
        d: Slot,
        reg: SpecialReg,
    },
    BarSync {
        id: u32,
    },
    Shfl {
        mode: ShflMode,
        d: Slot,
        a: Slot,
        b: Slot,
        c: u32,
    },
    Ballot {
        d: Slot,
        p: Slot,
    },
    Elect {
        d: Slot,
    },
    /// `fence.proxy.async.shared::cta`.
    ProxyFence,
    /// Ops with no effect on the data model: the other fences, PDL control.
    Nop,
    MbarInit {
        bar: Slot,
        count: Slot,
    },
    /// `tx` is NONE for a plain arrive; `remote` for the shared::cluster form.
    MbarArrive {
        bar: Slot,
        tx: Slot,
        remote: bool,
    },
    MbarWait {
        bar: Slot,
        parity: Slot,
    },
    ClusterArrive,
    ClusterWait,
    Mapa {
        d: Slot,
        a: Slot,
        rank: Slot,
    },
    /// `mbarrier.expect_tx`: tx without an arrival.
    MbarExpectTx {
        bar: Slot,
        tx: Slot,
    },
    /// `bar.sync id, threads` (`wait`) or `bar.arrive id, threads`.
    NamedBar {
        id: u32,
        threads: u32,
        wait: bool,
    },
    SetMaxNreg {
        regs: u32,
        increase: bool,
    },
    /// `src_bytes` is NONE when all `bytes` are copied.
    CpAsync {
        dst: Slot,
        src: Slot,
        bytes: u32,
        src_bytes: Slot,
    },
    CpAsyncCommit,
    CpAsyncWait {
        n: u32,
    },
    BulkLoad {
        dst: Slot,
        src: Slot,
        bytes: Slot,
        bar: Slot,
    },
    BulkPrefetch {
        src: Slot,
        bytes: Slot,
    },
    /// `st.async`: `n` b32 values `s[..n]` to the shared::cluster address `dst`, completing
    /// on the mbarrier `bar` of the same CTA.
    StoreAsync {
        dst: Slot,
        n: u32,
        s: [Slot; 4],
        bar: Slot,
    },
    /// Coordinate slots are `lists[coords..coords + rank]`; `mask` is NONE without
    /// multicast.
    TensorLoad {
        dst: Slot,
        map: Slot,
        coords: u32,
        rank: u32,
        bar: Slot,
        mask: Slot,
    },
    TensorStore {
        src: Slot,
        map: Slot,
        coords: u32,
        rank: u32,
    },
    BulkCommit,
    BulkWait {
        n: u32,
    },
    PrefetchMap {
        map: Slot,
    },
    TcAlloc {
        dst: Slot,
        ncols: u32,
    },
    TcRelinquish,
    TcDealloc {
        taddr: Slot,
        ncols: u32,
    },
    TcMma {
        d: Slot,
        a: Slot,
        b: Slot,
        idesc: Slot,
        acc: Slot,
    },
    TcCommit {
        mbar: Slot,
    },
    /// Destination slots are `lists[list..list + n]`.
    TcLd {
        list: u32,
        n: u32,
        taddr: Slot,
    },
    TcWaitLd,
    /// Source slots are `lists[list..list + n]`.
    TcSt {
        list: u32,
        n: u32,
        taddr: Slot,
    },
    TcWaitSt,
    /// `ldmatrix` / `stmatrix`: register slots `lists[list..list + n]`, one per matrix.
    Matrix {
        list: u32,
        n: u32,
        addr: Slot,
        trans: bool,
        store: bool,
    },
    WgFence,
    WgMma(WgMmaIns),
    WgCommit,
    WgWait {
        n: u32,
    },
    If {
        c: Slot,
        else_pc: u32,
    },
    Else {
        if_pc: u32,
        end_pc: u32,
    },
    EndIf {
        if_pc: u32,
    },
    LoopBegin,
    LoopTest {
        c: Slot,
        exit_pc: u32,
    },
    LoopEnd {
        head_pc: u32,
    },
    Stage {
        id: u32,
    },
    Exit,
}

/// What each compiled op came from, for messages and the debug trace.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    pub(crate) op: &'static str,
    pub(crate) loc: SourceLoc,
    pub(crate) stage: Option<u32>,
    /// Index into [`Program::insts`] for ops traced from an IR instruction.
    pub(crate) inst: Option<u32>,
    /// Register slots the op reads and writes: `uses[use_at..use_at + nuse]`, then
    /// `ndef` more.
    pub(crate) use_at: u32,
    pub(crate) nuse: u16,
    pub(crate) ndef: u16,
}

/// A kernel compiled for the interpreter: compile once, run many times.
pub struct Program {
    pub(crate) kernel: Kernel,
    pub(crate) code: Vec<Ins>,
    pub(crate) meta: Vec<Meta>,
    /// Variable-length slot lists (tcgen05.ld destinations, wgmma accumulators).
    pub(crate) lists: Vec<Slot>,
    /// Slots each op reads then writes (see [`Meta::use_at`]).
    pub(crate) uses: Vec<Slot>,
    /// Register slots plus constant slots.
    pub(crate) nslots: u32,
    /// Constant slots and their values.
    pub(crate) consts: Vec<(Slot, u64)>,
    /// The slot of each IR register (NONE when it never occurs).
    pub(crate) reg_slot: Vec<Slot>,
    /// The IR instructions in code order.
    pub(crate) insts: Vec<Inst>,
    /// Slots needed by the registers alone (the peak number of live registers).
    pub(crate) reg_slots: u32,
}

impl Program {
    /// Compiles `kernel`. Fails on IR that breaks a rule of [`crate::ir::verify`] (checked
    /// first, so lowering below relies on it) and on ops the interpreter does not run yet.
    pub fn compile(kernel: &Kernel) -> Result<Program, InterpError> {
        crate::ir::verify::verify(kernel)?;
        let reg_slot = allocate(kernel);
        let reg_slots = reg_slot
            .iter()
            .filter(|&&s| s != NONE)
            .map(|&s| s + 1)
            .max()
            .unwrap_or(0);
        let mut c = Compiler {
            kernel,
            reg_slot: &reg_slot,
            code: Vec::new(),
            meta: Vec::new(),
            lists: Vec::new(),
            uses: Vec::new(),
            consts: HashMap::new(),
            const_list: Vec::new(),
            next_slot: reg_slots,
            insts: Vec::new(),
            stage: None,
        };
        c.block(&kernel.body)?;
        let end = SourceLoc {
            file: "<kernel end>",
            line: 0,
            column: 0,
        };
        c.push_ctrl(Ins::Exit, "exit", end);
        let Compiler {
            code,
            meta,
            lists,
            uses,
            next_slot,
            const_list,
            insts,
            ..
        } = c;
        Ok(Program {
            kernel: kernel.clone(),
            code,
            meta,
            lists,
            uses,
            nslots: next_slot,
            consts: const_list,
            reg_slot,
            insts,
            reg_slots,
        })
    }

    /// Register-file slots per warp: the peak of simultaneously live registers, plus
    /// constants.
    pub fn slots(&self) -> u32 {
        self.nslots
    }

    /// The peak of simultaneously live virtual registers (what the slot allocation packs
    /// `kernel.regs.len()` registers into).
    pub fn register_slots(&self) -> u32 {
        self.reg_slots
    }

    /// Bytes of register file one warp needs (`slots x 32 lanes x 8 bytes`).
    pub fn warp_register_bytes(&self) -> usize {
        self.nslots as usize * 32 * 8
    }

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The title of the stage in force when the op at `pc` was traced.
    pub(crate) fn stage_title(&self, pc: usize) -> Option<String> {
        self.meta[pc]
            .stage
            .map(|s| self.kernel.stages[s as usize].clone())
    }
}

/// Live intervals over the linearised code, packed into slots by a linear scan.
fn allocate(kernel: &Kernel) -> Vec<Slot> {
    let n = kernel.regs.len();
    let mut live = Liveness {
        first: vec![u32::MAX; n],
        last: vec![0; n],
        pos: 0,
        loops: Vec::new(),
        loop_ends: Vec::new(),
        stretch: Vec::new(),
        last_stretch: vec![u32::MAX; n],
    };
    live.block(&kernel.body);
    // A register used inside a loop but defined before it is live around the back edge.
    for &(r, l) in &live.stretch {
        let end = live.loop_ends[l as usize];
        live.last[r] = live.last[r].max(end);
    }
    let mut order: Vec<usize> = (0..n).filter(|&r| live.first[r] != u32::MAX).collect();
    order.sort_by_key(|&r| live.first[r]);
    let mut slot = vec![NONE; n];
    let mut active: BinaryHeap<Reverse<(u32, Slot)>> = BinaryHeap::new();
    let mut free: Vec<Slot> = Vec::new();
    let mut next = 0;
    for r in order {
        // Intervals are inclusive: a register read by an op and one written by the same op
        // never share a slot, so no op sees its operand overwritten by its own result.
        while let Some(&Reverse((end, s))) = active.peek() {
            if end >= live.first[r] {
                break;
            }
            active.pop();
            free.push(s);
        }
        let s = free.pop().unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        slot[r] = s;
        active.push(Reverse((live.last[r], s)));
    }
    slot
}

struct Liveness {
    first: Vec<u32>,
    last: Vec<u32>,
    pos: u32,
    /// Open loops: (loop id, start position).
    loops: Vec<(u32, u32)>,
    loop_ends: Vec<u32>,
    /// (register, loop id): the register must live to that loop's end.
    stretch: Vec<(usize, u32)>,
    last_stretch: Vec<u32>,
}

impl Liveness {
    fn occur(&mut self, r: Reg) {
        let r = r.index();
        if self.first[r] == u32::MAX {
            self.first[r] = self.pos;
        }
        self.last[r] = self.last[r].max(self.pos);
        // The outermost open loop that started after the register's first occurrence.
        let first = self.first[r];
        if let Some(&(id, _)) = self.loops.iter().find(|&&(_, start)| start > first)
            && self.last_stretch[r] != id
        {
            self.last_stretch[r] = id;
            self.stretch.push((r, id));
        }
    }

    fn block(&mut self, b: &Block) {
        for stmt in &b.stmts {
            match stmt {
                Stmt::Inst(i) => {
                    self.pos += 1;
                    i.op.visit_regs(&mut |r, _| self.occur(r));
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    self.pos += 1;
                    self.occur(*cond);
                    self.block(then_body);
                    self.pos += 1;
                    self.block(else_body);
                    self.pos += 1;
                }
                Stmt::Loop {
                    header, cond, body, ..
                } => {
                    self.pos += 1;
                    let id = self.loop_ends.len() as u32;
                    self.loop_ends.push(0);
                    self.loops.push((id, self.pos));
                    self.block(header);
                    self.pos += 1;
                    self.occur(*cond);
                    self.block(body);
                    self.pos += 1;
                    self.loops.pop();
                    self.loop_ends[id as usize] = self.pos;
                }
                Stmt::Stage(_) | Stmt::Comment(_) => {}
            }
        }
    }
}

struct Compiler<'k> {
    kernel: &'k Kernel,
    reg_slot: &'k [Slot],
    code: Vec<Ins>,
    meta: Vec<Meta>,
    lists: Vec<Slot>,
    uses: Vec<Slot>,
    consts: HashMap<u64, Slot>,
    const_list: Vec<(Slot, u64)>,
    next_slot: u32,
    insts: Vec<Inst>,
    stage: Option<u32>,
}

impl Compiler<'_> {
    fn err(&self, inst: &Inst, message: String) -> InterpError {
        InterpError::Compile {
            kernel: self.kernel.name.clone(),
            message: format!("`{}`: {message}", inst.op.name()),
            loc: inst.loc,
        }
    }

    fn reg(&self, r: Reg) -> Slot {
        self.reg_slot[r.index()]
    }

    fn konst(&mut self, v: u64) -> Slot {
        if let Some(&s) = self.consts.get(&v) {
            return s;
        }
        let s = self.next_slot;
        self.next_slot += 1;
        self.consts.insert(v, s);
        self.const_list.push((s, v));
        s
    }

    fn opnd(&mut self, o: &Operand) -> Slot {
        match o {
            Operand::Reg(r) => self.reg(*r),
            Operand::Imm(v) => self.konst(*v),
        }
    }

    /// The slots of a store's 1, 2 or 4 values, NONE past them.
    fn stored(&mut self, src: &[Operand]) -> [Slot; 4] {
        let mut s = [NONE; 4];
        for (i, o) in src.iter().enumerate() {
            s[i] = self.opnd(o);
        }
        s
    }

    fn ty(&self, r: Reg) -> Ty {
        self.kernel.reg_ty(r)
    }

    fn pc(&self) -> u32 {
        self.code.len() as u32
    }

    fn push_ctrl(&mut self, ins: Ins, op: &'static str, loc: SourceLoc) {
        self.code.push(ins);
        let use_at = self.uses.len() as u32;
        self.meta.push(Meta {
            op,
            loc,
            stage: self.stage,
            inst: None,
            use_at,
            nuse: 0,
            ndef: 0,
        });
    }

    fn push_cond(&mut self, ins: Ins, op: &'static str, loc: SourceLoc, cond: Reg) {
        self.push_ctrl(ins, op, loc);
        self.uses.push(self.reg(cond));
        self.meta.last_mut().expect("just pushed").nuse = 1;
    }

    fn block(&mut self, b: &Block) -> Result<(), InterpError> {
        for stmt in &b.stmts {
            match stmt {
                Stmt::Inst(i) => self.inst(i)?,
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    loc,
                } => {
                    let if_pc = self.pc();
                    let c = self.reg(*cond);
                    self.push_cond(Ins::If { c, else_pc: 0 }, "bra (if)", *loc, *cond);
                    self.block(then_body)?;
                    let else_marker = self.pc();
                    self.push_ctrl(Ins::Else { if_pc, end_pc: 0 }, "bra (else)", *loc);
                    let else_pc = self.pc();
                    self.block(else_body)?;
                    let end_pc = self.pc();
                    self.push_ctrl(Ins::EndIf { if_pc }, "reconverge (if)", *loc);
                    self.code[if_pc as usize] = Ins::If { c, else_pc };
                    self.code[else_marker as usize] = Ins::Else { if_pc, end_pc };
                }
                Stmt::Loop {
                    header,
                    cond,
                    body,
                    loc,
                } => {
                    let begin = self.pc();
                    self.push_ctrl(Ins::LoopBegin, "loop", *loc);
                    self.block(header)?;
                    let test = self.pc();
                    let c = self.reg(*cond);
                    self.push_cond(
                        Ins::LoopTest { c, exit_pc: 0 },
                        "bra (loop exit)",
                        *loc,
                        *cond,
                    );
                    self.block(body)?;
                    self.push_ctrl(Ins::LoopEnd { head_pc: begin + 1 }, "bra (loop back)", *loc);
                    let exit_pc = self.pc();
                    self.code[test as usize] = Ins::LoopTest { c, exit_pc };
                }
                Stmt::Stage(id) => {
                    self.stage = Some(id.0);
                    let loc = SourceLoc {
                        file: "<stage>",
                        line: 0,
                        column: 0,
                    };
                    self.push_ctrl(Ins::Stage { id: id.0 }, "stage", loc);
                }
                Stmt::Comment(_) => {}
            }
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst) -> Result<(), InterpError> {
        let ins = self.lower(inst)?;
        let use_at = self.uses.len() as u32;
        let (mut nuse, mut ndef) = (0u16, 0u16);
        let mut defs = Vec::new();
        inst.op.visit_regs(&mut |r, is_def| {
            if is_def {
                defs.push(r);
            } else {
                nuse += 1;
                self.uses.push(self.reg_slot[r.index()]);
            }
        });
        for r in defs {
            ndef += 1;
            self.uses.push(self.reg(r));
        }
        self.code.push(ins);
        self.meta.push(Meta {
            op: inst.op.name(),
            loc: inst.loc,
            stage: inst.stage.map(|s| s.0).or(self.stage),
            inst: Some(self.insts.len() as u32),
            use_at,
            nuse,
            ndef,
        });
        self.insts.push(inst.clone());
        Ok(())
    }

    fn list(&mut self, regs: &[Reg]) -> u32 {
        let at = self.lists.len() as u32;
        for r in regs {
            let s = self.reg(*r);
            self.lists.push(s);
        }
        at
    }

    /// The one place each IR op is given its interpreter form.
    fn lower(&mut self, inst: &Inst) -> Result<Ins, InterpError> {
        Ok(match &inst.op {
            Op::Alu(op) => self.alu(inst, op)?,
            Op::Cvt(op) => {
                let zero = self.konst(0);
                let (op, d, abc) = match op {
                    CvtOp::F32x2ToBf16x2 { dst, lo, hi } => (
                        Packed::F32x2ToBf16x2,
                        dst,
                        [self.opnd(lo), self.opnd(hi), zero],
                    ),
                    CvtOp::F32x2ToE4m3x2 { dst, lo, hi } => (
                        Packed::F32x2ToE4m3x2,
                        dst,
                        [self.opnd(lo), self.opnd(hi), zero],
                    ),
                    CvtOp::F32x2ToUe8m0x2 { dst, lo, hi } => (
                        Packed::F32x2ToUe8m0x2,
                        dst,
                        [self.opnd(lo), self.opnd(hi), zero],
                    ),
                    CvtOp::E4m3x2ToF16x2 { dst, src } => {
                        (Packed::E4m3x2ToF16x2, dst, [self.reg(*src), zero, zero])
                    }
                    CvtOp::E2m1x2ToF16x2 { dst, src, byte } => (
                        Packed::E2m1x2ToF16x2(*byte),
                        dst,
                        [self.reg(*src), zero, zero],
                    ),
                    CvtOp::Ue8m0x2ToBf16x2 { dst, src } => {
                        (Packed::Ue8m0x2ToBf16x2, dst, [self.reg(*src), zero, zero])
                    }
                    CvtOp::F16ToF32 { dst, src } => {
                        (Packed::F16ToF32, dst, [self.reg(*src), zero, zero])
                    }
                    CvtOp::Bf16x2 { op, dst, a, b, c } => {
                        let op = match op {
                            Bf16x2Arith::Mul => Packed::Bf16x2Mul,
                            Bf16x2Arith::Fma => Packed::Bf16x2Fma,
                        };
                        (op, dst, [self.opnd(a), self.opnd(b), self.opnd(c)])
                    }
                };
                Ins::Packed {
                    op,
                    d: self.reg(*d),
                    abc,
                }
            }
            Op::Mem(op) => self.mem(inst, op)?,
            Op::Copy(op) => self.copy(op),
            Op::Sync(op) => match op {
                SyncOp::NamedBarrier { id, threads, wait } => {
                    if *id >= 16 {
                        return Err(self.err(inst, format!("barrier id {id} is not in 0..16")));
                    }
                    Ins::NamedBar {
                        id: *id,
                        threads: *threads,
                        wait: *wait,
                    }
                }
                SyncOp::SetMaxNreg { regs, increase } => Ins::SetMaxNreg {
                    regs: *regs,
                    increase: *increase,
                },
                SyncOp::ReadSpecial { dst, reg } => Ins::Special {
                    d: self.reg(*dst),
                    reg: *reg,
                },
                SyncOp::BarSync { id } => Ins::BarSync { id: *id },
                SyncOp::Shfl {
                    mode,
                    dst,
                    src,
                    b,
                    c,
                } => Ins::Shfl {
                    mode: *mode,
                    d: self.reg(*dst),
                    a: self.reg(*src),
                    b: self.opnd(b),
                    c: *c,
                },
                SyncOp::Ballot { dst, pred } => Ins::Ballot {
                    d: self.reg(*dst),
                    p: self.reg(*pred),
                },
                SyncOp::Elect { dst } => Ins::Elect { d: self.reg(*dst) },
                SyncOp::Fence(FenceKind::ProxyAsyncSharedCta) => Ins::ProxyFence,
                // Clusters run one after another here, each warp's accesses in program
                // order, so every store is visible to every later access: the ordering
                // fences (and PDL) have nothing left to order, and one left out shows
                // only on a GPU.
                SyncOp::Fence(
                    FenceKind::AcqRelCluster | FenceKind::AcqRelGpu | FenceKind::MbarrierInit,
                )
                | SyncOp::GridDepWait
                | SyncOp::GridDepLaunchDependents => Ins::Nop,
            },
            Op::Mbarrier(op) => match op {
                MbarrierOp::ExpectTx { bar, tx_bytes } => Ins::MbarExpectTx {
                    bar: self.opnd(bar),
                    tx: self.opnd(tx_bytes),
                },
                MbarrierOp::Init { bar, count } => Ins::MbarInit {
                    bar: self.opnd(bar),
                    count: self.opnd(count),
                },
                MbarrierOp::Arrive { bar } => Ins::MbarArrive {
                    bar: self.opnd(bar),
                    tx: NONE,
                    remote: false,
                },
                MbarrierOp::ArriveExpectTx { bar, tx_bytes } => Ins::MbarArrive {
                    bar: self.opnd(bar),
                    tx: self.opnd(tx_bytes),
                    remote: false,
                },
                MbarrierOp::ArriveCluster { bar } => Ins::MbarArrive {
                    bar: self.opnd(bar),
                    tx: NONE,
                    remote: true,
                },
                MbarrierOp::WaitParity { bar, parity }
                | MbarrierOp::WaitParityCluster { bar, parity } => Ins::MbarWait {
                    bar: self.opnd(bar),
                    parity: self.opnd(parity),
                },
            },
            Op::Cluster(op) => match op {
                ClusterOp::Arrive { .. } => Ins::ClusterArrive,
                ClusterOp::Wait => Ins::ClusterWait,
                ClusterOp::Mapa { dst, addr, rank } => Ins::Mapa {
                    d: self.reg(*dst),
                    a: self.opnd(addr),
                    rank: self.opnd(rank),
                },
            },
            Op::Tcgen05(op) => match op {
                Tcgen05Op::Alloc { dst_smem, ncols } => Ins::TcAlloc {
                    dst: self.opnd(dst_smem),
                    ncols: *ncols,
                },
                Tcgen05Op::RelinquishAllocPermit => Ins::TcRelinquish,
                Tcgen05Op::Dealloc { taddr, ncols } => Ins::TcDealloc {
                    taddr: self.opnd(taddr),
                    ncols: *ncols,
                },
                Tcgen05Op::Mma {
                    d_tmem,
                    a_desc,
                    b_desc,
                    idesc,
                    accumulate,
                } => Ins::TcMma {
                    d: self.opnd(d_tmem),
                    a: self.opnd(a_desc),
                    b: self.opnd(b_desc),
                    idesc: self.opnd(idesc),
                    acc: self.opnd(accumulate),
                },
                Tcgen05Op::Commit { mbar } => Ins::TcCommit {
                    mbar: self.opnd(mbar),
                },
                Tcgen05Op::Ld32x32b { dst, taddr } => Ins::TcLd {
                    list: self.list(dst),
                    n: dst.len() as u32,
                    taddr: self.opnd(taddr),
                },
                Tcgen05Op::WaitLd => Ins::TcWaitLd,
                Tcgen05Op::St32x32b { src, taddr } => Ins::TcSt {
                    list: self.list(src),
                    n: src.len() as u32,
                    taddr: self.opnd(taddr),
                },
                Tcgen05Op::WaitSt => Ins::TcWaitSt,
                Tcgen05Op::FenceBeforeThreadSync | Tcgen05Op::FenceAfterThreadSync => Ins::Nop,
            },
            Op::Wgmma(op) => match op {
                WgmmaOp::Fence => Ins::WgFence,
                WgmmaOp::MmaAsync {
                    n,
                    acc,
                    a_desc,
                    b_desc,
                    scale_d,
                    trans_a,
                    trans_b,
                } => Ins::WgMma(WgMmaIns {
                    n: *n,
                    list: self.list(acc),
                    a: WgA::Desc(self.opnd(a_desc)),
                    b: self.opnd(b_desc),
                    scale: self.opnd(scale_d),
                    ta: *trans_a,
                    tb: *trans_b,
                }),
                WgmmaOp::MmaAsyncRs {
                    n,
                    acc,
                    a,
                    b_desc,
                    scale_d,
                    trans_b,
                } => Ins::WgMma(WgMmaIns {
                    n: *n,
                    list: self.list(acc),
                    a: WgA::Regs(self.list(a)),
                    b: self.opnd(b_desc),
                    scale: self.opnd(scale_d),
                    ta: 0,
                    tb: *trans_b,
                }),
                WgmmaOp::CommitGroup => Ins::WgCommit,
                WgmmaOp::WaitGroup { n } => Ins::WgWait { n: *n },
            },
        })
    }

    fn copy(&mut self, op: &CopyOp) -> Ins {
        let coords = |c: &mut Self, coords: &[Operand]| {
            let at = c.lists.len() as u32;
            for o in coords {
                let s = c.opnd(o);
                c.lists.push(s);
            }
            at
        };
        match op {
            CopyOp::CpAsync {
                dst,
                src,
                bytes,
                src_bytes,
            } => Ins::CpAsync {
                dst: self.opnd(dst),
                src: self.opnd(src),
                bytes: *bytes,
                src_bytes: src_bytes.as_ref().map_or(NONE, |n| self.opnd(n)),
            },
            CopyOp::CpAsyncCommit => Ins::CpAsyncCommit,
            CopyOp::CpAsyncWait { n } => Ins::CpAsyncWait { n: *n },
            CopyOp::StoreAsync { dst, src, bar } => Ins::StoreAsync {
                dst: self.opnd(dst),
                n: src.len() as u32,
                s: self.stored(src),
                bar: self.opnd(bar),
            },
            CopyOp::BulkLoad {
                dst,
                src,
                bytes,
                bar,
            } => Ins::BulkLoad {
                dst: self.opnd(dst),
                src: self.opnd(src),
                bytes: self.opnd(bytes),
                bar: self.opnd(bar),
            },
            CopyOp::TensorLoad {
                dst,
                map,
                coords: cs,
                bar,
                multicast,
            } => Ins::TensorLoad {
                dst: self.opnd(dst),
                map: self.reg(*map),
                coords: coords(self, cs),
                rank: cs.len() as u32,
                bar: self.opnd(bar),
                mask: multicast.as_ref().map_or(NONE, |m| self.opnd(m)),
            },
            CopyOp::TensorStore {
                src,
                map,
                coords: cs,
            } => Ins::TensorStore {
                src: self.opnd(src),
                map: self.reg(*map),
                coords: coords(self, cs),
                rank: cs.len() as u32,
            },
            CopyOp::BulkCommit => Ins::BulkCommit,
            CopyOp::BulkWaitGroup { n, .. } => Ins::BulkWait { n: *n },
            CopyOp::PrefetchTensorMap { map } => Ins::PrefetchMap {
                map: self.reg(*map),
            },
            CopyOp::BulkPrefetchL2 { src, bytes } => Ins::BulkPrefetch {
                src: self.opnd(src),
                bytes: self.opnd(bytes),
            },
        }
    }

    fn alu(&mut self, inst: &Inst, op: &AluOp) -> Result<Ins, InterpError> {
        // `ir::verify` admits only the types each op exists on; a miss here is a gap in the
        // interpreter, named as such.
        let bad = |c: &Self, ty: Ty| {
            c.err(
                inst,
                format!(
                    "on {} has no interpreter form (an interpreter bug)",
                    ty.ptx()
                ),
            )
        };
        Ok(match op {
            AluOp::Mov { dst, src } => Ins::Mov {
                d: self.reg(*dst),
                a: self.opnd(src),
            },
            AluOp::BitCast { dst, src } => Ins::Mov {
                d: self.reg(*dst),
                a: self.reg(*src),
            },
            AluOp::Unary { op, ty, dst, a } => {
                let un = match (op, ty) {
                    (UnaryOp::Neg, Ty::S32 | Ty::U32 | Ty::B32) => Un::Neg32,
                    (UnaryOp::Neg, Ty::S64 | Ty::U64) => Un::Neg64,
                    (UnaryOp::Neg, Ty::F32) => Un::NegF,
                    (UnaryOp::Not, Ty::Pred) => Un::NotPred,
                    (UnaryOp::Not, Ty::B16) => Un::Not(0xffff),
                    (UnaryOp::Not, Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32) => Un::Not(0xffff_ffff),
                    (UnaryOp::Not, Ty::U64 | Ty::S64) => Un::Not(u64::MAX),
                    (UnaryOp::Abs, Ty::S32) => Un::Abs32,
                    (UnaryOp::Abs, Ty::S64) => Un::Abs64,
                    (UnaryOp::Abs, Ty::F32) => Un::AbsF,
                    (UnaryOp::Ex2Approx, Ty::F32) => Un::Ex2,
                    (UnaryOp::Rcp, Ty::F32) => Un::Rcp,
                    _ => return Err(bad(self, *ty)),
                };
                Ins::Un {
                    op: un,
                    d: self.reg(*dst),
                    a: self.opnd(a),
                }
            }
            AluOp::Binary { op, ty, dst, a, b } => {
                let bin = binary_op(*op, *ty).ok_or_else(|| bad(self, *ty))?;
                Ins::Bin {
                    op: bin,
                    d: self.reg(*dst),
                    a: self.opnd(a),
                    b: self.opnd(b),
                }
            }
            AluOp::MulWide { ty, dst, a, b } => {
                let bin = match ty {
                    Ty::U32 | Ty::B32 => Bin::MulWideU32,
                    Ty::S32 => Bin::MulWideS32,
                    _ => return Err(bad(self, *ty)),
                };
                Ins::Bin {
                    op: bin,
                    d: self.reg(*dst),
                    a: self.opnd(a),
                    b: self.opnd(b),
                }
            }
            AluOp::Fma { ty, dst, a, b, c } => {
                let op = match ty {
                    Ty::F32 => Tern::FmaF,
                    Ty::U32 | Ty::S32 | Ty::B32 => Tern::Mad32,
                    Ty::U64 | Ty::S64 => Tern::Mad64,
                    _ => return Err(bad(self, *ty)),
                };
                Ins::Tern {
                    op,
                    d: self.reg(*dst),
                    abc: [self.opnd(a), self.opnd(b), self.opnd(c)],
                }
            }
            AluOp::Setp { cmp, ty, dst, a, b } => Ins::Setp {
                cmp: *cmp,
                ty: Num::of(*ty),
                d: self.reg(*dst),
                a: self.opnd(a),
                b: self.opnd(b),
            },
            AluOp::Selp {
                dst, a, b, cond, ..
            } => Ins::Selp {
                d: self.reg(*dst),
                a: self.opnd(a),
                b: self.opnd(b),
                p: self.reg(*cond),
            },
            AluOp::Convert {
                dst_ty,
                src_ty,
                rounding,
                dst,
                src,
            } => Ins::Convert {
                from: Num::of(*src_ty),
                to: Num::of(*dst_ty),
                rnd: *rounding,
                d: self.reg(*dst),
                a: self.opnd(src),
            },
            AluOp::Pack { dst, lo, hi } => Ins::Pack {
                half: self.ty(*dst).bits() / 2,
                d: self.reg(*dst),
                lo: self.opnd(lo),
                hi: self.opnd(hi),
            },
            AluOp::Unpack { lo, hi, src } => Ins::Unpack {
                half: self.ty(*src).bits() / 2,
                lo: self.reg(*lo),
                hi: self.reg(*hi),
                a: self.reg(*src),
            },
            AluOp::Prmt {
                dst,
                a,
                b,
                selector,
            } => Ins::Prmt {
                d: self.reg(*dst),
                a: self.opnd(a),
                b: self.opnd(b),
                c: self.opnd(selector),
            },
        })
    }

    fn mem(&mut self, inst: &Inst, op: &MemOp) -> Result<Ins, InterpError> {
        Ok(match op {
            MemOp::ParamAddress { dst, param } => {
                if *param as usize >= self.kernel.params.len() {
                    return Err(self.err(inst, format!("parameter #{param} does not exist")));
                }
                Ins::Mov {
                    d: self.reg(*dst),
                    a: self.konst(super::param_address(*param)),
                }
            }
            MemOp::LdParam { dst, param, offset } => {
                let bytes = (self.ty(*dst).bits() / 8).max(1);
                Ins::LdParam {
                    d: self.reg(*dst),
                    param: *param,
                    offset: *offset,
                    bytes,
                }
            }
            MemOp::CvtaGlobal { dst, src } => Ins::Mov {
                d: self.reg(*dst),
                a: self.reg(*src),
            },
            MemOp::SmemBase { dst } => Ins::Mov {
                d: self.reg(*dst),
                a: self.konst(super::SMEM_BASE as u64),
            },
            MemOp::LdMatrix { dst, addr, trans } => Ins::Matrix {
                list: self.list(dst),
                n: dst.len() as u32,
                addr: self.opnd(addr),
                trans: *trans,
                store: false,
            },
            MemOp::StMatrix { src, addr, trans } => Ins::Matrix {
                list: self.list(src),
                n: src.len() as u32,
                addr: self.opnd(addr),
                trans: *trans,
                store: true,
            },
            MemOp::Ld {
                space,
                ty,
                dst,
                addr,
                offset,
                pred,
                ..
            } => {
                let n = dst.len() as u32;
                let mut d = [NONE; 4];
                for (i, r) in dst.iter().enumerate() {
                    d[i] = self.reg(*r);
                }
                Ins::Ld {
                    space: *space,
                    ty: *ty,
                    n,
                    d,
                    addr: self.opnd(addr),
                    offset: *offset,
                    pred: pred.map_or(NONE, |p| self.reg(p)),
                }
            }
            MemOp::St {
                space,
                ty,
                src,
                addr,
                offset,
                pred,
            } => Ins::St {
                space: *space,
                ty: *ty,
                n: src.len() as u32,
                s: self.stored(src),
                addr: self.opnd(addr),
                offset: *offset,
                pred: pred.map_or(NONE, |p| self.reg(p)),
            },
            MemOp::AtomAdd {
                dst,
                addr,
                offset,
                src,
                ..
            } => Ins::AtomAdd {
                d: self.reg(*dst),
                addr: self.opnd(addr),
                offset: *offset,
                s: self.opnd(src),
            },
        })
    }
}

/// The interpreter form of a binary op on `ty`, if the op exists on it.
fn binary_op(op: BinaryOp, ty: Ty) -> Option<Bin> {
    use BinaryOp as B;
    let w32 = matches!(ty, Ty::U32 | Ty::S32 | Ty::B32);
    let w64 = matches!(ty, Ty::U64 | Ty::S64);
    let signed = ty.is_signed();
    let f = ty == Ty::F32;
    Some(match op {
        B::Add if w32 => Bin::Add32,
        B::Add if w64 => Bin::Add64,
        B::Add if f => Bin::AddF,
        B::Sub if w32 => Bin::Sub32,
        B::Sub if w64 => Bin::Sub64,
        B::Sub if f => Bin::SubF,
        B::Mul if w32 => Bin::Mul32,
        B::Mul if w64 => Bin::Mul64,
        B::Mul if f => Bin::MulF,
        B::MulHi if w32 => {
            if signed {
                Bin::MulHiS32
            } else {
                Bin::MulHiU32
            }
        }
        B::MulHi if w64 => {
            if signed {
                Bin::MulHiS64
            } else {
                Bin::MulHiU64
            }
        }
        B::Div if w32 => {
            if signed {
                Bin::DivS32
            } else {
                Bin::DivU32
            }
        }
        B::Div if w64 => {
            if signed {
                Bin::DivS64
            } else {
                Bin::DivU64
            }
        }
        B::Div if f => Bin::DivF,
        B::Rem if w32 => {
            if signed {
                Bin::RemS32
            } else {
                Bin::RemU32
            }
        }
        B::Rem if w64 => {
            if signed {
                Bin::RemS64
            } else {
                Bin::RemU64
            }
        }
        B::Min if w32 => {
            if signed {
                Bin::MinS32
            } else {
                Bin::MinU32
            }
        }
        B::Min if w64 => {
            if signed {
                Bin::MinS64
            } else {
                Bin::MinU64
            }
        }
        B::Min if f => Bin::MinF,
        B::Max if w32 => {
            if signed {
                Bin::MaxS32
            } else {
                Bin::MaxU32
            }
        }
        B::Max if w64 => {
            if signed {
                Bin::MaxS64
            } else {
                Bin::MaxU64
            }
        }
        B::Max if f => Bin::MaxF,
        B::And => Bin::And,
        B::Or => Bin::Or,
        B::Xor => Bin::Xor,
        B::Shl if ty != Ty::Pred => Bin::Shl(ty.bits()),
        B::Shr if ty == Ty::S32 => Bin::ShrS32,
        B::Shr if ty == Ty::S64 => Bin::ShrS64,
        B::Shr if ty != Ty::Pred && !f => Bin::ShrU(ty.bits()),
        _ => return None,
    })
}
