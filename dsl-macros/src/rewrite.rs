//! The body rewrite shared by `#[kernel]` and `#[device]`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Expr, ExprForLoop, ExprIf, ExprWhile, Ident, Path};

use crate::analysis::{Effects, Part, effects, pattern_names};

/// Rewrites control flow, comparisons and `&&`/`||` in a function body.
pub struct Rewriter {
    /// Path of the `dsl_core` crate.
    pub krate: Path,
}

impl Rewriter {
    fn loc(&self, span: Span) -> TokenStream {
        let k = &self.krate;
        quote_spanned! {span=>
            #k::ir::SourceLoc {
                file: ::core::file!(),
                line: ::core::line!(),
                column: ::core::column!(),
            }
        }
    }

    /// The path of the control-flow module, spanned where a type error should point.
    fn control_at(&self, span: Span) -> TokenStream {
        let k = &self.krate;
        let mut path = quote_spanned!(span=> #k::trace::control);
        path = path
            .into_iter()
            .map(|mut t| {
                t.set_span(span);
                t
            })
            .collect();
        path
    }
}

/// `(a, b,)`, `(mut a, mut b,)` and `&["a", "b"]` for a list of carried variables.
fn carried(names: &[String], span: Span) -> (TokenStream, TokenStream, TokenStream) {
    let idents: Vec<Ident> = names.iter().map(|n| Ident::new(n, span)).collect();
    let tuple = quote!((#(#idents,)*));
    let mut_tuple = quote!((#(mut #idents,)*));
    let strs = quote!(&[#(#names),*]);
    (tuple, mut_tuple, strs)
}

/// An `if` condition containing `let` (an `if let` or a let chain) is plain Rust.
fn has_let(cond: &Expr) -> bool {
    match cond {
        Expr::Let(_) => true,
        Expr::Binary(b) if matches!(b.op, BinOp::And(_)) => has_let(&b.left) || has_let(&b.right),
        Expr::Paren(p) => has_let(&p.expr),
        _ => false,
    }
}

impl Rewriter {
    fn rewrite_if(&self, i: &ExprIf) -> Option<Expr> {
        if has_let(&i.cond) {
            return None;
        }
        let mut parts = vec![Part::Block(&i.then_branch)];
        if let Some((_, e)) = &i.else_branch {
            parts.push(Part::Expr(e));
        }
        let fx = effects(&parts, &[]);
        let cond = &i.cond;
        let then_branch = &i.then_branch;
        let else_branch = i
            .else_branch
            .as_ref()
            .map(|(_, e)| quote!(#e))
            .unwrap_or_else(|| quote!({}));
        let span = i.if_token.span();
        if fx.must_be_compile_time() {
            let at_cond = self.control_at(cond.span());
            return Some(syn::parse_quote_spanned! {span=>
                if #at_cond::StaticCond::value(#cond) #then_branch else #else_branch
            });
        }
        let (tuple, mut_tuple, names) = carried(&fx.assigned, span);
        let loc = self.loc(span);
        let assign_back = assign_back(&fx, &tuple);
        let at_if = self.control_at(span);
        Some(syn::parse_quote_spanned! {span=>
            {
                let (__dsl_state, __dsl_value) = #at_if::branch(
                    #cond,
                    #tuple,
                    #names,
                    #loc,
                    |__dsl_arm, #mut_tuple| {
                        let __dsl_value = if __dsl_arm #then_branch else #else_branch;
                        (#tuple, __dsl_value)
                    },
                );
                #assign_back
                __dsl_value
            }
        })
    }

    fn rewrite_while(&self, w: &ExprWhile) -> Option<Expr> {
        if has_let(&w.cond) {
            return None;
        }
        let fx = effects(&[Part::Expr(&w.cond), Part::Block(&w.body)], &[]);
        let cond = &w.cond;
        let body = &w.body;
        let span = w.while_token.span();
        if fx.must_be_compile_time() || w.label.is_some() {
            let label = &w.label;
            let at_cond = self.control_at(cond.span());
            return Some(syn::parse_quote_spanned! {span=>
                #label while #at_cond::StaticCond::value(#cond) #body
            });
        }
        let (tuple, mut_tuple, names) = carried(&fx.assigned, span);
        let loc = self.loc(span);
        let assign_back = assign_back(&fx, &tuple);
        let at_while = self.control_at(span);
        Some(syn::parse_quote_spanned! {span=>
            {
                let __dsl_state = #at_while::while_loop(
                    #tuple,
                    #names,
                    #loc,
                    |__dsl_is_cond, #mut_tuple| {
                        if __dsl_is_cond {
                            let __dsl_cond = #cond;
                            (#tuple, ::core::option::Option::Some(__dsl_cond))
                        } else {
                            #body;
                            (#tuple, ::core::option::Option::None)
                        }
                    },
                );
                #assign_back
            }
        })
    }

    fn rewrite_for(&self, f: &ExprForLoop) -> Option<Expr> {
        let bound = pattern_names(&f.pat);
        let fx = effects(&[Part::Block(&f.body)], &bound);
        let pat = &f.pat;
        let iter = &f.expr;
        let body = &f.body;
        let span = f.for_token.span();
        if fx.must_be_compile_time() || f.label.is_some() {
            let label = &f.label;
            let at_iter = self.control_at(iter.span());
            return Some(syn::parse_quote_spanned! {span=>
                {
                    let __dsl_iter = #at_iter::static_iter(#iter);
                    #label for #pat in __dsl_iter #body
                }
            });
        }
        let (tuple, mut_tuple, names) = carried(&fx.assigned, span);
        let loc = self.loc(span);
        let assign_back = assign_back(&fx, &tuple);
        let at_for = self.control_at(span);
        Some(syn::parse_quote_spanned! {span=>
            {
                let __dsl_state = #at_for::for_loop(
                    #iter,
                    #tuple,
                    #names,
                    #loc,
                    |#pat, #mut_tuple| {
                        #body;
                        #tuple
                    },
                );
                #assign_back
            }
        })
    }

    fn rewrite_binary(&self, b: &syn::ExprBinary) -> Option<Expr> {
        let (l, r) = (&b.left, &b.right);
        let span = b.op.span();
        let control = self.control_at(span);
        let call = |method: &str, trait_name: &str| -> Expr {
            let m = Ident::new(method, span);
            let t = Ident::new(trait_name, span);
            syn::parse_quote_spanned! {span=> #control::#t::#m(&(#l), &(#r)) }
        };
        Some(match b.op {
            BinOp::Eq(_) => call("dsl_eq", "DslEq"),
            BinOp::Ne(_) => call("dsl_ne", "DslEq"),
            BinOp::Lt(_) => call("dsl_lt", "DslOrd"),
            BinOp::Le(_) => call("dsl_le", "DslOrd"),
            BinOp::Gt(_) => call("dsl_gt", "DslOrd"),
            BinOp::Ge(_) => call("dsl_ge", "DslOrd"),
            BinOp::And(_) => syn::parse_quote_spanned! {span=>
                #control::DslAnd::dsl_and(#l, || #r)
            },
            BinOp::Or(_) => syn::parse_quote_spanned! {span=>
                #control::DslOr::dsl_or(#l, || #r)
            },
            _ => return None,
        })
    }
}

/// `(a, b,) = __dsl_state;`, or nothing when nothing is carried.
fn assign_back(fx: &Effects, tuple: &TokenStream) -> TokenStream {
    if fx.assigned.is_empty() {
        quote!()
    } else {
        // A carried variable need not be read after the loop or branch (a loop's state is
        // often dead once it ends), so this write-back must not count as a dead store.
        quote!(
            #[allow(unused_assignments)]
            {
                #tuple = __dsl_state;
            }
        )
    }
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        visit_mut::visit_expr_mut(self, e);
        let replacement = match e {
            Expr::If(i) => self.rewrite_if(i),
            Expr::While(w) => self.rewrite_while(w),
            Expr::ForLoop(f) => self.rewrite_for(f),
            Expr::Binary(b) => self.rewrite_binary(b),
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {
        // Nested items are ordinary Rust, traced or not by their own attributes.
    }

    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {
        // Macro arguments are token streams (assert!, format!): left as written.
    }
}
