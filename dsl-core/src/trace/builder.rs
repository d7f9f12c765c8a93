//! The thread-local recorder behind every DSL operation.

use std::cell::RefCell;
use std::collections::HashMap;

use super::{Diagnostic, TraceError};
use crate::Target;
use crate::ir::{
    AluOp, Block, Inst, Kernel, LaunchBounds, Op, Operand, Param, ParamKind, Reg, SmemBuffer,
    SourceLoc, SpecialReg, StageId, Stmt, Ty,
};

thread_local! {
    static BUILDER: RefCell<Option<Builder>> = const { RefCell::new(None) };
}

/// Runs `f` on the active trace's builder.
///
/// # Panics
/// When no kernel is being traced: DSL operations only mean something inside a trace.
pub(crate) fn with_builder<R>(f: impl FnOnce(&mut Builder) -> R) -> R {
    BUILDER.with(|cell| {
        let mut guard = cell.borrow_mut();
        let builder = guard.as_mut().expect(
            "a DSL operation ran outside a kernel trace: call it from a #[kernel] or #[device] \
             function while the kernel is being traced",
        );
        f(builder)
    })
}

/// The target of the kernel being traced: kernels may specialise on it at trace time.
pub fn current_target() -> Target {
    with_builder(|b| b.target)
}

/// Traces `body` as kernel `name` for `target`. Every error found on the way is returned
/// together; a kernel is returned only when there was none.
///
/// # Panics
/// When called while another trace is running on this thread.
pub fn trace_kernel(name: &str, target: Target, body: impl FnOnce()) -> Result<Kernel, TraceError> {
    BUILDER.with(|cell| {
        let mut slot = cell.borrow_mut();
        assert!(
            slot.is_none(),
            "kernel `{name}` is traced while another trace is running on this thread"
        );
        *slot = Some(Builder::new(name, target));
    });
    struct ClearOnExit;
    impl Drop for ClearOnExit {
        fn drop(&mut self) {
            BUILDER.with(|cell| cell.borrow_mut().take());
        }
    }
    let _clear = ClearOnExit;
    body();
    let builder = BUILDER
        .with(|cell| cell.borrow_mut().take())
        .expect("the trace's builder disappeared during the trace");
    builder.finish()
}

/// Values computed once at kernel entry (hoisted so they dominate every use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum EntryValue {
    Special(SpecialReg),
    Param { index: u32, offset: u32 },
    GlobalAddress { index: u32 },
    ParamAddress { index: u32 },
    SmemBase,
    WarpIdUniform,
}

enum FrameKind {
    Root,
    Then {
        cond: Reg,
        loc: SourceLoc,
    },
    Else {
        cond: Reg,
        then_body: Block,
        loc: SourceLoc,
    },
    LoopHeader {
        loc: SourceLoc,
    },
    LoopBody {
        header: Block,
        cond: Reg,
        loc: SourceLoc,
    },
}

struct Frame {
    kind: FrameKind,
    stmts: Vec<Stmt>,
    scope: u32,
}

/// Where a register was first defined: the frame depth and scope id, and the source line.
#[derive(Clone, Copy)]
struct Definition {
    depth: usize,
    scope: u32,
    loc: SourceLoc,
}

pub(crate) struct Builder {
    pub(crate) target: Target,
    name: String,
    regs: Vec<Ty>,
    defs: Vec<Option<Definition>>,
    frames: Vec<Frame>,
    next_scope: u32,
    prologue: Vec<Stmt>,
    entry_values: HashMap<EntryValue, Reg>,
    pub(crate) params: Vec<Param>,
    stages: Vec<String>,
    stage: Option<StageId>,
    pub(crate) launch: LaunchBounds,
    pub(crate) smem_bytes: u32,
    pub(crate) smem_buffers: Vec<SmemBuffer>,
    diagnostics: Vec<Diagnostic>,
    /// The warp role being traced since `RegisterPlan::enter`, until its region closes.
    pub(crate) role: Option<RoleBudget>,
}

/// A role's register budget and the register fragments made in it so far.
pub(crate) struct RoleBudget {
    pub(crate) index: usize,
    pub(crate) budget: u32,
    /// The frame depth the role was entered at: it ends when that frame closes.
    depth: usize,
    pub(crate) fragments: u32,
}

impl Builder {
    fn new(name: &str, target: Target) -> Self {
        Builder {
            target,
            name: name.to_string(),
            regs: Vec::new(),
            defs: Vec::new(),
            frames: vec![Frame {
                kind: FrameKind::Root,
                stmts: Vec::new(),
                scope: 0,
            }],
            next_scope: 1,
            prologue: Vec::new(),
            entry_values: HashMap::new(),
            params: Vec::new(),
            stages: Vec::new(),
            stage: None,
            launch: LaunchBounds::default(),
            smem_bytes: 0,
            smem_buffers: Vec::new(),
            diagnostics: Vec::new(),
            role: None,
        }
    }

    /// From here to the end of the current runtime region the code runs as role `index`
    /// with `budget` registers a thread.
    pub(crate) fn enter_role(&mut self, index: usize, budget: u32) {
        self.role = Some(RoleBudget {
            index,
            budget,
            depth: self.frames.len(),
            fragments: 0,
        });
    }

    fn finish(mut self) -> Result<Kernel, TraceError> {
        assert_eq!(
            self.frames.len(),
            1,
            "a runtime if or loop was left open at the end of the trace"
        );
        if self.launch.threads.iter().product::<u32>() == 0 {
            let loc = SourceLoc {
                file: "<kernel>",
                line: 0,
                column: 0,
            };
            self.error(
                "the kernel never declared its block shape: call threads(x, y, z)".to_string(),
                loc,
            );
        }
        if !self.diagnostics.is_empty() {
            return Err(TraceError {
                kernel: self.name,
                diagnostics: self.diagnostics,
            });
        }
        let root = self.frames.pop().expect("root frame");
        let mut stmts = self.prologue;
        stmts.extend(root.stmts);
        Ok(Kernel {
            name: self.name,
            target: self.target,
            params: self.params,
            regs: self.regs,
            body: Block { stmts },
            stages: self.stages,
            launch: self.launch,
            smem_bytes: self.smem_bytes,
            smem_buffers: self.smem_buffers,
        })
    }

    /// Records an error; the same message at the same place and stage is recorded once (a
    /// mistake inside an unrolled loop would otherwise be reported once per iteration).
    pub(crate) fn error(&mut self, message: String, loc: SourceLoc) {
        let stage = self.stage.map(|s| self.stages[s.0 as usize].clone());
        let diagnostic = Diagnostic {
            message,
            loc,
            stage,
        };
        if !self.diagnostics.contains(&diagnostic) {
            self.diagnostics.push(diagnostic);
        }
    }

    pub(crate) fn new_reg(&mut self, ty: Ty) -> Reg {
        let r = Reg(self.regs.len() as u32);
        self.regs.push(ty);
        self.defs.push(None);
        r
    }

    pub(crate) fn reg_ty(&self, r: Reg) -> Ty {
        self.regs[r.index()]
    }

    fn current(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("root frame")
    }

    fn define_here(&mut self, r: Reg, loc: SourceLoc) {
        if self.defs[r.index()].is_none() {
            let depth = self.frames.len() - 1;
            let scope = self.frames[depth].scope;
            self.defs[r.index()] = Some(Definition { depth, scope, loc });
        }
    }

    fn define_at(&mut self, r: Reg, depth: usize, loc: SourceLoc) {
        let scope = self.frames[depth].scope;
        self.defs[r.index()] = Some(Definition { depth, scope, loc });
    }

    fn check_visible(&mut self, r: Reg, loc: SourceLoc) {
        let Some(def) = self.defs[r.index()] else {
            panic!("register {r:?} is used before any definition (an op builder bug)");
        };
        let visible = def.depth < self.frames.len() && self.frames[def.depth].scope == def.scope;
        if !visible {
            self.error(
                format!(
                    "a runtime value defined inside a runtime if/loop body (at {}) is used \
                     outside it; declare the variable before the if/loop and assign it inside, \
                     so that its value is merged",
                    def.loc
                ),
                loc,
            );
        }
    }

    /// Records `op` in the current block after checking its target and its operands.
    pub(crate) fn push(&mut self, op: Op, loc: SourceLoc) {
        if let Err(message) =
            crate::ir::verify::rules::available(op.name(), &op.requirement(), self.target)
        {
            self.error(message, loc);
        }
        op.visit_regs(&mut |r, is_def| {
            if is_def {
                self.define_here(r, loc)
            } else {
                self.check_visible(r, loc)
            }
        });
        let stage = self.stage;
        self.current()
            .stmts
            .push(Stmt::Inst(Inst { op, loc, stage }));
    }

    /// A register holding a value computed once at kernel entry.
    pub(crate) fn entry_value(
        &mut self,
        key: EntryValue,
        ty: Ty,
        loc: SourceLoc,
        make: impl FnOnce(&mut Self, Reg) -> Vec<Op>,
    ) -> Reg {
        if let Some(&r) = self.entry_values.get(&key) {
            return r;
        }
        let dst = self.new_reg(ty);
        for op in make(self, dst) {
            op.visit_regs(&mut |r, is_def| {
                if is_def && self.defs[r.index()].is_none() {
                    self.defs[r.index()] = Some(Definition {
                        depth: 0,
                        scope: 0,
                        loc,
                    });
                }
            });
            self.prologue.push(Stmt::Inst(Inst {
                op,
                loc,
                stage: None,
            }));
        }
        self.entry_values.insert(key, dst);
        dst
    }

    pub(crate) fn declare_param(&mut self, name: &str, kind: ParamKind) -> u32 {
        self.params.push(Param {
            name: name.to_string(),
            kind,
        });
        (self.params.len() - 1) as u32
    }

    pub(crate) fn begin_stage(&mut self, title: String) {
        let id = StageId(self.stages.len() as u32);
        self.stages.push(title);
        self.stage = Some(id);
        self.current().stmts.push(Stmt::Stage(id));
    }

    pub(crate) fn comment(&mut self, text: String) {
        self.current().stmts.push(Stmt::Comment(text));
    }

    fn push_frame(&mut self, kind: FrameKind) {
        self.next_scope += 1;
        let scope = self.next_scope;
        self.frames.push(Frame {
            kind,
            stmts: Vec::new(),
            scope,
        });
    }

    fn pop_frame(&mut self) -> Frame {
        assert!(self.frames.len() > 1, "popped the root frame");
        let frame = self.frames.pop().expect("frame");
        if self
            .role
            .as_ref()
            .is_some_and(|r| r.depth > self.frames.len())
        {
            self.role = None;
        }
        frame
    }

    pub(crate) fn begin_if(&mut self, cond: Reg, loc: SourceLoc) {
        self.check_visible(cond, loc);
        self.push_frame(FrameKind::Then { cond, loc });
    }

    pub(crate) fn begin_else(&mut self) {
        let frame = self.pop_frame();
        let FrameKind::Then { cond, loc } = frame.kind else {
            panic!("begin_else without begin_if");
        };
        let then_body = Block { stmts: frame.stmts };
        self.push_frame(FrameKind::Else {
            cond,
            then_body,
            loc,
        });
    }

    /// Closes the if; for each (then value, else value) returns the register that holds
    /// the merged value after it.
    pub(crate) fn end_if(&mut self, merges: &[(Reg, Reg)]) -> Vec<Reg> {
        let frame = self.pop_frame();
        let FrameKind::Else {
            cond,
            mut then_body,
            loc,
        } = frame.kind
        else {
            panic!("end_if without begin_else");
        };
        let mut else_body = Block { stmts: frame.stmts };
        let parent_depth = self.frames.len() - 1;
        let stage = self.stage;
        let mut results = Vec::with_capacity(merges.len());
        for &(t, e) in merges {
            if t == e {
                results.push(t);
                continue;
            }
            let ty = self.reg_ty(t);
            let other = self.reg_ty(e);
            assert!(
                ty.bits() == other.bits() && ty.is_float() == other.is_float(),
                "merged values of different register classes: {ty:?} and {other:?}"
            );
            let dst = self.new_reg(ty);
            self.define_at(dst, parent_depth, loc);
            for (body, src) in [(&mut then_body, t), (&mut else_body, e)] {
                body.stmts.push(Stmt::Inst(Inst {
                    op: Op::Alu(AluOp::Mov {
                        dst,
                        src: Operand::Reg(src),
                    }),
                    loc,
                    stage,
                }));
            }
            results.push(dst);
        }
        self.current().stmts.push(Stmt::If {
            cond,
            then_body,
            else_body,
            loc,
        });
        results
    }

    pub(crate) fn begin_loop(&mut self, loc: SourceLoc) {
        self.push_frame(FrameKind::LoopHeader { loc });
    }

    pub(crate) fn begin_loop_body(&mut self, cond: Reg) {
        let frame = self.pop_frame();
        let FrameKind::LoopHeader { loc } = frame.kind else {
            panic!("begin_loop_body without begin_loop");
        };
        let header = Block { stmts: frame.stmts };
        self.frames.push(Frame {
            kind: FrameKind::LoopBody { header, cond, loc },
            stmts: Vec::new(),
            scope: frame.scope,
        });
        self.check_visible(cond, loc);
    }

    /// Closes the loop body, writing each carried register from its new value (as one
    /// parallel copy: a new value may itself be another carried register).
    pub(crate) fn end_loop(&mut self, copies: &[(Reg, Reg)]) {
        let loc = match &self.current().kind {
            FrameKind::LoopBody { loc, .. } => *loc,
            _ => panic!("end_loop outside a loop body"),
        };
        let carried: Vec<Reg> = copies.iter().map(|&(c, _)| c).collect();
        let mut staged = Vec::new();
        for &(c, new) in copies {
            if c == new {
                continue;
            }
            let src = if carried.contains(&new) {
                let tmp = self.new_reg(self.reg_ty(new));
                self.push(
                    Op::Alu(AluOp::Mov {
                        dst: tmp,
                        src: Operand::Reg(new),
                    }),
                    loc,
                );
                tmp
            } else {
                new
            };
            staged.push((c, src));
        }
        for (c, src) in staged {
            self.push(
                Op::Alu(AluOp::Mov {
                    dst: c,
                    src: Operand::Reg(src),
                }),
                loc,
            );
        }
        let frame = self.pop_frame();
        let FrameKind::LoopBody { header, cond, loc } = frame.kind else {
            unreachable!("checked above");
        };
        self.current().stmts.push(Stmt::Loop {
            header,
            cond,
            body: Block { stmts: frame.stmts },
            loc,
        });
    }
}

/// A special register, read once at kernel entry.
#[track_caller]
pub(crate) fn entry_special(reg: SpecialReg) -> crate::trace::Val<u32> {
    let loc = SourceLoc::caller();
    crate::trace::Val::from_reg(with_builder(|b| special(b, reg, loc)))
}

fn special(b: &mut Builder, reg: SpecialReg, loc: SourceLoc) -> Reg {
    b.entry_value(EntryValue::Special(reg), Ty::U32, loc, |_, dst| {
        vec![Op::Sync(crate::ir::SyncOp::ReadSpecial { dst, reg })]
    })
}

/// `tid.x / 32` broadcast from lane 0, computed once at kernel entry.
#[track_caller]
pub(crate) fn entry_warp_id() -> crate::trace::Val<u32> {
    let loc = SourceLoc::caller();
    crate::trace::Val::from_reg(with_builder(|b| {
        let tid = special(b, SpecialReg::TidX, loc);
        b.entry_value(EntryValue::WarpIdUniform, Ty::U32, loc, |b, dst| {
            let warp = b.new_reg(Ty::U32);
            vec![
                Op::Alu(AluOp::Binary {
                    op: crate::ir::BinaryOp::Shr,
                    ty: Ty::U32,
                    dst: warp,
                    a: Operand::Reg(tid),
                    b: Operand::Imm(5),
                }),
                Op::Sync(crate::ir::SyncOp::Shfl {
                    mode: crate::ir::ShflMode::Idx,
                    dst,
                    src: warp,
                    b: Operand::Imm(0),
                    c: 0x1f,
                }),
            ]
        })
    }))
}
