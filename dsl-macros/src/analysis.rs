//! What a block does to the variables around it: which outer variables it assigns (they
//! must be carried out of a runtime branch or loop) and whether it leaves the enclosing
//! construct (`break`, `continue`, `return`, `?`), which only a compile-time one can.

use std::collections::BTreeSet;

use syn::visit::{self, Visit};
use syn::{Expr, Pat};

/// The result of looking at one construct's blocks.
#[derive(Default)]
pub struct Effects {
    /// Outer variables assigned, in first-assignment order.
    pub assigned: Vec<String>,
    /// The block assigns through a dereference (`*r = ..`): not representable as a carried
    /// variable, so the construct must be compile-time.
    pub assigns_through_deref: bool,
    /// The block contains a `break`/`continue` that leaves it, a `return` or a `?`.
    pub escapes: bool,
}

impl Effects {
    /// Whether the construct can only be compile-time: it leaves its block early or
    /// assigns through a dereference, neither of which a traced region can carry.
    pub fn must_be_compile_time(&self) -> bool {
        self.escapes || self.assigns_through_deref
    }
}

/// Looks at the parts of one construct (its condition, blocks, `else`), with `bound` the
/// names the construct itself binds (e.g. a `for` pattern), which are not outer variables.
pub fn effects(parts: &[Part<'_>], bound: &[String]) -> Effects {
    let mut v = Visitor {
        scopes: vec![bound.iter().cloned().collect()],
        loop_depth: 0,
        closure_depth: 0,
        effects: Effects::default(),
    };
    for part in parts {
        match part {
            Part::Expr(e) => v.visit_expr(e),
            Part::Block(b) => v.visit_block(b),
        }
    }
    v.effects
}

/// A piece of a construct to analyse.
pub enum Part<'a> {
    Expr(&'a Expr),
    Block(&'a syn::Block),
}

/// Every identifier a pattern binds.
pub fn pattern_names(pat: &Pat) -> Vec<String> {
    struct Names(Vec<String>);
    impl<'ast> Visit<'ast> for Names {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.push(p.ident.to_string());
            visit::visit_pat_ident(self, p);
        }
    }
    let mut n = Names(Vec::new());
    n.visit_pat(pat);
    n.0
}

struct Visitor {
    scopes: Vec<BTreeSet<String>>,
    loop_depth: usize,
    closure_depth: usize,
    effects: Effects,
}

impl Visitor {
    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn bind(&mut self, pat: &Pat) {
        let names = pattern_names(pat);
        self.scopes.last_mut().expect("scope").extend(names);
    }

    fn assigned_place(&mut self, place: &Expr) {
        match place {
            Expr::Path(p) => {
                if let Some(ident) = p.path.get_ident() {
                    let name = ident.to_string();
                    if !self.is_local(&name) && !self.effects.assigned.contains(&name) {
                        self.effects.assigned.push(name);
                    }
                }
            }
            Expr::Field(f) => self.assigned_place(&f.base),
            Expr::Index(i) => self.assigned_place(&i.expr),
            Expr::Paren(p) => self.assigned_place(&p.expr),
            Expr::Tuple(t) => t.elems.iter().for_each(|e| self.assigned_place(e)),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
                self.effects.assigns_through_deref = true
            }
            _ => {}
        }
    }

    fn scoped(&mut self, f: impl FnOnce(&mut Self)) {
        self.scopes.push(BTreeSet::new());
        f(self);
        self.scopes.pop();
    }
}

impl<'ast> Visit<'ast> for Visitor {
    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.scoped(|v| visit::visit_block(v, b));
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        // The initialiser sees the outer names; the pattern binds after it.
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.bind(&l.pat);
    }

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        self.assigned_place(&a.left);
        visit::visit_expr(self, &a.left);
        self.visit_expr(&a.right);
    }

    fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
        use syn::BinOp::*;
        if matches!(
            b.op,
            AddAssign(_)
                | SubAssign(_)
                | MulAssign(_)
                | DivAssign(_)
                | RemAssign(_)
                | BitXorAssign(_)
                | BitAndAssign(_)
                | BitOrAssign(_)
                | ShlAssign(_)
                | ShrAssign(_)
        ) {
            self.assigned_place(&b.left);
        }
        visit::visit_expr_binary(self, b);
    }

    fn visit_expr_reference(&mut self, r: &'ast syn::ExprReference) {
        if r.mutability.is_some() {
            self.assigned_place(&r.expr);
        }
        visit::visit_expr_reference(self, r);
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        self.closure_depth += 1;
        self.scoped(|v| {
            for p in &c.inputs {
                v.bind(p);
            }
            v.visit_expr(&c.body);
        });
        self.closure_depth -= 1;
    }

    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        self.visit_expr(&f.expr);
        self.loop_depth += 1;
        self.scoped(|v| {
            v.bind(&f.pat);
            v.visit_block(&f.body);
        });
        self.loop_depth -= 1;
    }

    fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
        self.visit_expr(&w.cond);
        self.loop_depth += 1;
        self.visit_block(&w.body);
        self.loop_depth -= 1;
    }

    fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
        self.loop_depth += 1;
        self.visit_block(&l.body);
        self.loop_depth -= 1;
    }

    fn visit_expr_let(&mut self, l: &'ast syn::ExprLet) {
        self.visit_expr(&l.expr);
        self.bind(&l.pat);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        self.scoped(|v| {
            v.bind(&arm.pat);
            if let Some((_, guard)) = &arm.guard {
                v.visit_expr(guard);
            }
            v.visit_expr(&arm.body);
        });
    }

    fn visit_expr_break(&mut self, b: &'ast syn::ExprBreak) {
        if self.closure_depth == 0 && (self.loop_depth == 0 || b.label.is_some()) {
            self.effects.escapes = true;
        }
        visit::visit_expr_break(self, b);
    }

    fn visit_expr_continue(&mut self, c: &'ast syn::ExprContinue) {
        if self.closure_depth == 0 && (self.loop_depth == 0 || c.label.is_some()) {
            self.effects.escapes = true;
        }
    }

    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if self.closure_depth == 0 {
            self.effects.escapes = true;
        }
        visit::visit_expr_return(self, r);
    }

    fn visit_expr_try(&mut self, t: &'ast syn::ExprTry) {
        if self.closure_depth == 0 {
            self.effects.escapes = true;
        }
        visit::visit_expr_try(self, t);
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {
        // Nested items have their own scopes and control flow.
    }

    fn visit_macro(&mut self, _: &'ast syn::Macro) {
        // Macro bodies are token streams; their assignments are not visible here.
    }
}
