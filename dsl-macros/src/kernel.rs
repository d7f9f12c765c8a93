//! `#[kernel]` and `#[device]`: signature handling around the body rewrite.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{FnArg, ItemFn, LitStr, Meta, Pat, Path, Token};

use crate::rewrite::Rewriter;

struct Options {
    krate: Path,
    name: Option<LitStr>,
    debug: bool,
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut options = Options {
        krate: syn::parse_quote!(::dsl_core),
        name: None,
        debug: false,
    };
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        match &meta {
            Meta::Path(p) if p.is_ident("debug") => options.debug = true,
            Meta::NameValue(nv) if nv.path.is_ident("crate") => {
                options.krate = match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => s.parse()?,
                    syn::Expr::Path(p) => p.path.clone(),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "expected a path: `crate = dsl_core`",
                        ));
                    }
                }
            }
            Meta::NameValue(nv) if nv.path.is_ident("name") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => options.name = Some(s.clone()),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "expected a string: `name = \"entry_name\"`",
                    ));
                }
            },
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "unknown option: expected `name = \"..\"`, `crate = path` or `debug`",
                ));
            }
        }
    }
    Ok(options)
}

/// The item with a `compile_error!` beside it, so the IDE keeps seeing the function.
fn with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let error = error.to_compile_error();
    quote!(#error #item)
}

pub fn expand_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match kernel(attr, item.clone()) {
        Ok(ts) => ts,
        Err(e) => with_error(item, e),
    }
}

pub fn expand_device(attr: TokenStream, item: TokenStream) -> TokenStream {
    match device(attr, item.clone()) {
        Ok(ts) => ts,
        Err(e) => with_error(item, e),
    }
}

fn check_not_async(f: &ItemFn, what: &str) -> syn::Result<()> {
    match &f.sig.asyncness {
        Some(a) => Err(syn::Error::new(
            a.span(),
            format!("a {what} cannot be async: it runs once, at trace time"),
        )),
        None => Ok(()),
    }
}

fn kernel(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(attr)?;
    let mut f: ItemFn = syn::parse2(item)?;
    check_not_async(&f, "#[kernel]")?;
    if let Some(FnArg::Receiver(r)) = f.sig.inputs.first() {
        return Err(syn::Error::new(
            r.span(),
            "a #[kernel] is a free function: move it out of the impl block",
        ));
    }
    if let syn::ReturnType::Type(_, ty) = &f.sig.output {
        return Err(syn::Error::new(
            ty.span(),
            "a #[kernel] returns nothing: it writes its results through its parameters",
        ));
    }
    let krate = options.krate.clone();
    let mut comptime_args = Vec::new();
    let mut param_decls = Vec::new();
    for arg in &f.sig.inputs {
        let FnArg::Typed(pt) = arg else {
            unreachable!("receivers were rejected")
        };
        let is_comptime = pt.attrs.iter().any(|a| a.path().is_ident("comptime"));
        if is_comptime {
            let mut pt = pt.clone();
            pt.attrs.retain(|a| !a.path().is_ident("comptime"));
            comptime_args.push(pt);
            continue;
        }
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "a kernel parameter needs a plain name (it becomes the PTX parameter's name)",
            ));
        };
        let name = pi.ident.to_string();
        let pat = &pt.pat;
        let ty = &pt.ty;
        param_decls.push(quote! {
            let #pat: #ty = <#ty as #krate::trace::KernelParam>::declare(#name);
        });
    }
    let entry = options
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&f.sig.ident.to_string(), Span::call_site()));
    Rewriter {
        krate: krate.clone(),
    }
    .visit_block_mut(&mut f.block);
    let body = &f.block;
    let vis = &f.vis;
    let attrs = &f.attrs;
    let ident = &f.sig.ident;
    let (impl_generics, _, where_clause) = f.sig.generics.split_for_impl();
    let expanded = quote! {
        #(#attrs)*
        #[allow(unused_mut, unused_variables, unused_braces, clippy::let_unit_value, clippy::unit_arg, clippy::unnecessary_operation, clippy::no_effect)]
        #vis fn #ident #impl_generics (
            target: #krate::Target,
            #(#comptime_args),*
        ) -> ::core::result::Result<#krate::ir::Kernel, #krate::trace::TraceError> #where_clause {
            #krate::trace::trace_kernel(#entry, target, move || {
                #(#param_decls)*
                #body
            })
        }
    };
    if options.debug {
        eprintln!("{}", expanded.to_token_stream());
    }
    Ok(expanded)
}

fn device(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(attr)?;
    if let Some(name) = options.name {
        return Err(syn::Error::new(
            name.span(),
            "a #[device] function is inlined and has no entry name",
        ));
    }
    let mut f: ItemFn = syn::parse2(item)?;
    check_not_async(&f, "#[device] function")?;
    Rewriter {
        krate: options.krate,
    }
    .visit_block_mut(&mut f.block);
    f.attrs.push(syn::parse_quote!(#[allow(unused_mut, unused_braces, clippy::let_unit_value, clippy::unit_arg, clippy::unnecessary_operation, clippy::no_effect)]));
    let expanded = f.into_token_stream();
    if options.debug {
        eprintln!("{expanded}");
    }
    Ok(expanded)
}
