//! Prints a [`Kernel`] in the text form (the grammar is in the module docs).

use std::fmt::Write;

use crate::ir::{Block, Inst, Kernel, Operand, ParamKind, Reg, SourceLoc, StageId, Stmt};

use super::lex::{is_word, quote};
use super::line::{Arg, Line};
use super::ops::lower;
use super::words::Word;

/// The column source locations are aligned to, when the op leaves room.
const LOC_COLUMN: usize = 64;

/// `kernel` in the text form: deterministic, one op per line.
pub fn print(kernel: &Kernel) -> String {
    let mut p = Printer {
        kernel,
        annotated: vec![false; kernel.regs.len()],
        stage: None,
        out: String::new(),
    };
    p.block(&kernel.body, 1);
    let body = std::mem::take(&mut p.out);
    p.header();
    p.out.push_str("{\n");
    p.out.push_str(&body);
    p.out.push_str("}\n");
    p.out
}

struct Printer<'k> {
    kernel: &'k Kernel,
    /// Registers whose type a definition in the body shows.
    annotated: Vec<bool>,
    /// The stage in force at this point of the text: what an op carries unless it says.
    stage: Option<StageId>,
    out: String,
}

fn name(s: &str) -> String {
    if is_word(s) { s.to_string() } else { quote(s) }
}

fn triple([x, y, z]: [u32; 3]) -> String {
    format!("{x}, {y}, {z}")
}

impl Printer<'_> {
    fn header(&mut self) {
        let k = self.kernel;
        let o = &mut self.out;
        let _ = writeln!(o, "kernel {}", name(&k.name));
        let _ = writeln!(o, "target {}", k.target.word());
        let _ = writeln!(o, "threads {}", triple(k.launch.threads));
        if let Some(n) = k.launch.min_ctas_per_sm {
            let _ = writeln!(o, "min_ctas_per_sm {n}");
        }
        if let Some(n) = k.launch.max_regs {
            let _ = writeln!(o, "max_regs {n}");
        }
        if let Some(c) = k.launch.cluster {
            let _ = writeln!(o, "cluster {}", triple(c));
        }
        for p in &k.params {
            let kind = match p.kind {
                ParamKind::Scalar(ty) => ty.word().to_string(),
                ParamKind::Tensor { elem, rank } => format!("tensor<{}, {rank}>", elem.word()),
                ParamKind::TensorMap { elem, rank } => {
                    format!("tensor_map<{}, {rank}>", elem.word())
                }
            };
            let _ = writeln!(o, "param {}: {kind}", name(&p.name));
        }
        if k.smem_bytes > 0 || !k.smem_buffers.is_empty() {
            let _ = writeln!(o, "smem {}", k.smem_bytes);
        }
        for b in &k.smem_buffers {
            let _ = write!(
                o,
                "smem_buffer {} offset={} bytes={} align={}",
                name(&b.name),
                b.offset,
                b.bytes,
                b.align
            );
            if let Some(layout) = &b.layout {
                let _ = write!(o, " layout={}", quote(layout));
            }
            o.push('\n');
        }
        for (i, title) in k.stages.iter().enumerate() {
            let _ = writeln!(o, "stage {i} {}", quote(title));
        }
        for (i, ty) in k.regs.iter().enumerate() {
            if !self.annotated[i] {
                let _ = writeln!(o, "reg %{i}: {}", ty.word());
            }
        }
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
    }

    /// Ends the line started at `start` with the location, aligned when it fits.
    fn end_line(&mut self, start: usize, loc: SourceLoc) {
        let width = self.out[start..].chars().count();
        let pad = LOC_COLUMN.saturating_sub(width).max(2);
        for _ in 0..pad {
            self.out.push(' ');
        }
        let _ = writeln!(self.out, "@{loc}");
    }

    fn block(&mut self, block: &Block, depth: usize) {
        for stmt in &block.stmts {
            match stmt {
                Stmt::Inst(inst) => self.inst(inst, depth),
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    loc,
                } => {
                    let start = self.out.len();
                    self.indent(depth);
                    let _ = write!(self.out, "if %{} {{", cond.0);
                    self.end_line(start, *loc);
                    self.block(then_body, depth + 1);
                    if !else_body.stmts.is_empty() {
                        self.indent(depth);
                        self.out.push_str("} else {\n");
                        self.block(else_body, depth + 1);
                    }
                    self.indent(depth);
                    self.out.push_str("}\n");
                }
                Stmt::Loop {
                    header,
                    cond,
                    body,
                    loc,
                } => {
                    let start = self.out.len();
                    self.indent(depth);
                    self.out.push_str("loop {");
                    self.end_line(start, *loc);
                    self.block(header, depth + 1);
                    self.indent(depth);
                    let _ = writeln!(self.out, "}} while %{} {{", cond.0);
                    self.block(body, depth + 1);
                    self.indent(depth);
                    self.out.push_str("}\n");
                }
                Stmt::Stage(id) => {
                    self.stage = Some(*id);
                    self.out.push('\n');
                    self.indent(depth);
                    let title = self.kernel.stages.get(id.0 as usize);
                    let _ = write!(self.out, "stage {}", id.0);
                    if let Some(title) = title {
                        let _ = write!(self.out, "    ; ---- {}", title.replace('\n', " "));
                    }
                    self.out.push('\n');
                }
                Stmt::Comment(text) => {
                    self.indent(depth);
                    let _ = writeln!(self.out, "comment {}", quote(text));
                }
            }
        }
    }

    fn inst(&mut self, inst: &Inst, depth: usize) {
        let k = self.kernel;
        let line = lower(&inst.op, &|r| k.reg_ty(r), &|p| {
            k.params
                .get(p as usize)
                .map_or_else(|| format!("#{p}"), |p| name(&p.name))
        });
        let start = self.out.len();
        self.indent(depth);
        self.line(&line);
        if inst.stage != self.stage {
            match inst.stage {
                Some(s) => {
                    let _ = write!(self.out, " stage={}", s.0);
                }
                None => self.out.push_str(" stage=none"),
            }
        }
        self.end_line(start, inst.loc);
    }

    fn line(&mut self, line: &Line) {
        if !line.defs.is_empty() {
            let defs = self.defs(&line.defs);
            let _ = write!(self.out, "{defs} = ");
        }
        self.out.push_str(line.kind.mnemonic());
        for s in &line.suffixes {
            self.out.push('.');
            self.out.push_str(s);
        }
        for (i, a) in line.args.iter().enumerate() {
            self.out.push_str(if i == 0 { " " } else { ", " });
            let a = arg(a);
            self.out.push_str(&a);
        }
        if let Some(p) = line.pred {
            let _ = write!(self.out, " if %{}", p.0);
        }
    }

    /// `%1..%4:f32, %9:pred`: runs of consecutive registers of one type.
    fn defs(&mut self, defs: &[Reg]) -> String {
        let k = self.kernel;
        let mut parts = Vec::new();
        let mut i = 0;
        while i < defs.len() {
            let ty = k.reg_ty(defs[i]);
            let mut j = i;
            while j + 1 < defs.len()
                && defs[j + 1].0 == defs[j].0 + 1
                && k.reg_ty(defs[j + 1]) == ty
            {
                j += 1;
            }
            for r in &defs[i..=j] {
                self.annotated[r.index()] = true;
            }
            parts.push(if i == j {
                format!("%{}:{}", defs[i].0, ty.word())
            } else {
                format!("%{}..%{}:{}", defs[i].0, defs[j].0, ty.word())
            });
            i = j + 1;
        }
        parts.join(", ")
    }
}

fn imm(bits: u64) -> String {
    if bits > 0xffff {
        format!("0x{bits:X}")
    } else {
        format!("{bits}")
    }
}

fn operand(o: Operand) -> String {
    match o {
        Operand::Reg(r) => format!("%{}", r.0),
        Operand::Imm(bits) => imm(bits),
    }
}

fn arg(a: &Arg) -> String {
    match a {
        Arg::Val(o) => operand(*o),
        Arg::Float(Operand::Imm(bits)) if *bits <= u32::MAX as u64 => format!("0f{bits:08X}"),
        Arg::Float(o) => operand(*o),
        Arg::Addr(o, 0) => format!("[{}]", operand(*o)),
        Arg::Addr(o, off) if *off < 0 => format!("[{}-{}]", operand(*o), off.unsigned_abs()),
        Arg::Addr(o, off) => format!("[{}+{off}]", operand(*o)),
        Arg::List(os) => {
            let mut parts = Vec::new();
            let mut i = 0;
            while i < os.len() {
                let mut j = i;
                if let Operand::Reg(first) = os[i] {
                    while j + 1 < os.len()
                        && os[j + 1] == Operand::Reg(Reg(first.0 + (j + 1 - i) as u32))
                    {
                        j += 1;
                    }
                }
                parts.push(if j > i {
                    format!("{}..{}", operand(os[i]), operand(os[j]))
                } else {
                    operand(os[i])
                });
                i = j + 1;
            }
            format!("{{{}}}", parts.join(", "))
        }
        Arg::Word(w) => w.clone(),
    }
}
