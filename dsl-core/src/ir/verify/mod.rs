//! `ir::verify`: one pass over a [`Kernel`] that checks every rule the back ends rely on,
//! so that the PTX printer and the interpreter (which both run it first) never meet IR they
//! cannot give a meaning to, and each rule has one home ([`rules`]).
//!
//! What it checks:
//! - every register is in the register file and defined before it is used: earlier in the
//!   same block or an enclosing one, in both arms of an `If` for a use after it, or in a
//!   loop's header for a use after the loop;
//! - every op's operands: counts, register widths and types, immediates in range, the shapes
//!   the hardware has (wgmma N and its accumulator, tcgen05 ld widths and TMEM columns,
//!   vector widths, barrier ids and thread counts, `setmaxnreg`, `cp.async` and bulk sizes,
//!   TMA coordinate counts against the tensor map's rank, the map operand coming from
//!   `cvta.param` of a tensor-map parameter);
//! - the op exists on the kernel's target (its capabilities);
//! - the kernel: block and cluster shape, `.maxnreg` and `.minnctapersm`, the shared-memory
//!   buffers inside `smem_bytes` and `smem_bytes` within the target, tensor-map parameter
//!   ranks, `setmaxnreg` only with a fixed entry register count.
//!
//! Every violation is returned, each with the op's source location.

mod ops;
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use super::{Block, Inst, Kernel, MemOp, Op, ParamKind, Reg, SourceLoc, Stmt, SyncOp, Ty};

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The op's mnemonic, or `kernel` for a kernel-level rule.
    pub op: String,
    /// Where the op was traced (`<kernel>` for kernel-level rules).
    pub loc: SourceLoc,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: `{}`: {}", self.loc, self.op, self.message)
    }
}

/// Every rule a kernel breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct VerifyError {
    pub kernel: String,
    pub target: crate::Target,
    pub violations: Vec<Violation>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}` for {} breaks {} IR rule(s):",
            self.kernel,
            self.target,
            self.violations.len()
        )?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

/// The location kernel-level violations carry.
pub const KERNEL_LOC: SourceLoc = SourceLoc {
    file: "<kernel>",
    line: 0,
    column: 0,
};

/// Checks `kernel`; `Err` lists every violation.
pub fn verify(kernel: &Kernel) -> Result<(), VerifyError> {
    let mut v = Verifier {
        kernel,
        defined: vec![false; kernel.regs.len()],
        maps: HashMap::new(),
        setmaxnreg: None,
        violations: Vec::new(),
    };
    v.kernel_rules();
    v.block(&kernel.body);
    if let Some(loc) = v.setmaxnreg
        && let Err(message) = rules::setmaxnreg_entry(&kernel.launch)
    {
        v.push("setmaxnreg", loc, message);
    }
    if v.violations.is_empty() {
        Ok(())
    } else {
        Err(VerifyError {
            kernel: kernel.name.clone(),
            target: kernel.target,
            violations: v.violations,
        })
    }
}

struct Verifier<'k> {
    kernel: &'k Kernel,
    /// Registers defined on every path to the current point.
    defined: Vec<bool>,
    /// Registers holding a tensor map's address: the parameter each came from.
    maps: HashMap<Reg, u32>,
    /// The first `setmaxnreg`, whose kernel-level rule is checked at the end.
    setmaxnreg: Option<SourceLoc>,
    violations: Vec<Violation>,
}

impl Verifier<'_> {
    fn push(&mut self, op: &str, loc: SourceLoc, message: String) {
        self.violations.push(Violation {
            op: op.to_string(),
            loc,
            message,
        });
    }

    fn kernel_rules(&mut self) {
        let k = self.kernel;
        let mut found = Vec::new();
        found.push(rules::block_shape(k.launch.threads));
        if let Some(c) = k.launch.cluster {
            found.push(rules::cluster_shape(c));
        }
        if let Some(n) = k.launch.max_regs {
            found.push(rules::max_regs(n));
        }
        if let Some(n) = k.launch.min_ctas_per_sm {
            found.push(rules::min_ctas_per_sm(n));
        }
        found.push(rules::smem_bytes(k.smem_bytes, k.target));
        for b in &k.smem_buffers {
            found.push(rules::smem_buffer(b, k.smem_bytes));
        }
        for p in &k.params {
            if let ParamKind::TensorMap { rank, .. } = p.kind {
                found.push(
                    rules::tensor_map_rank(rank as usize)
                        .map_err(|e| format!("tensor-map parameter `{}` has {e}", p.name)),
                );
            }
        }
        for message in found.into_iter().filter_map(Result::err) {
            self.push("kernel", KERNEL_LOC, message);
        }
    }

    /// A register the structure reads (an `If` or `Loop` condition).
    fn condition(&mut self, r: Reg, what: &'static str, loc: SourceLoc) {
        let Some(&ty) = self.kernel.regs.get(r.index()) else {
            let n = self.kernel.regs.len();
            self.push(what, loc, format!("condition register #{} of {n}", r.0));
            return;
        };
        if !self.defined[r.index()] {
            self.push(
                what,
                loc,
                format!("condition register #{} is read before it is defined", r.0),
            );
        }
        if ty != Ty::Pred {
            self.push(
                what,
                loc,
                format!(
                    "condition register #{} is a {}; a branch tests a predicate (compare with \
                     `setp`)",
                    r.0,
                    ty.ptx()
                ),
            );
        }
    }

    fn block(&mut self, b: &Block) {
        for stmt in &b.stmts {
            match stmt {
                Stmt::Inst(i) => self.inst(i),
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    loc,
                } => {
                    self.condition(*cond, "bra (if)", *loc);
                    let before = self.defined.clone();
                    self.block(then_body);
                    let after_then = std::mem::replace(&mut self.defined, before);
                    self.block(else_body);
                    // After the `If`, what both arms define.
                    for (d, t) in self.defined.iter_mut().zip(after_then) {
                        *d &= t;
                    }
                }
                Stmt::Loop {
                    header,
                    cond,
                    body,
                    loc,
                } => {
                    self.block(header);
                    self.condition(*cond, "bra (loop exit)", *loc);
                    // The body may run zero times: after the loop, what the header defines.
                    let after_header = self.defined.clone();
                    self.block(body);
                    self.defined = after_header;
                }
                Stmt::Stage(id) => {
                    if id.0 as usize >= self.kernel.stages.len() {
                        self.push(
                            "stage",
                            KERNEL_LOC,
                            format!(
                                "stage #{} of a kernel with {} stage titles",
                                id.0,
                                self.kernel.stages.len()
                            ),
                        );
                    }
                }
                Stmt::Comment(_) => {}
            }
        }
    }

    fn inst(&mut self, inst: &Inst) {
        let name = inst.op.name();
        let k = self.kernel;
        // Registers first: an unknown one would make every other check meaningless.
        let mut unknown = Vec::new();
        let mut undefined = Vec::new();
        let mut defs = Vec::new();
        inst.op.visit_regs(&mut |r, is_def| {
            if r.index() >= k.regs.len() {
                unknown.push(r);
            } else if is_def {
                defs.push(r);
            } else if !self.defined[r.index()] {
                undefined.push(r);
            }
        });
        if !unknown.is_empty() {
            let list: Vec<_> = unknown.iter().map(|r| format!("#{}", r.0)).collect();
            self.push(
                name,
                inst.loc,
                format!(
                    "register(s) {} are not in the kernel's {} registers",
                    list.join(", "),
                    k.regs.len()
                ),
            );
            return;
        }
        undefined.dedup();
        for r in undefined {
            self.push(
                name,
                inst.loc,
                format!(
                    "register #{} ({}) is read before it is defined on every path here: define \
                     it earlier in this block or an enclosing one",
                    r.0,
                    k.reg_ty(r).ptx()
                ),
            );
        }
        if let Err(message) = rules::available(name, &inst.op.requirement(), k.target) {
            self.push(name, inst.loc, message);
        }
        for message in ops::check(k, &self.maps, &inst.op) {
            self.push(name, inst.loc, message);
        }
        for &r in &defs {
            self.defined[r.index()] = true;
            // A register rewritten by another op no longer holds a map's address.
            self.maps.remove(&r);
        }
        match &inst.op {
            Op::Mem(MemOp::ParamAddress { dst, param }) => {
                self.maps.insert(*dst, *param);
            }
            Op::Sync(SyncOp::SetMaxNreg { .. }) => {
                self.setmaxnreg.get_or_insert(inst.loc);
            }
            _ => {}
        }
    }
}
