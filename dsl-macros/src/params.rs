//! `#[derive(KernelParam)]`: a struct of parameters is declared field by field.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields};

pub fn derive(item: TokenStream) -> TokenStream {
    match expand(item) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(item: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(item)?;
    let fields = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => &named.named,
            _ => {
                return Err(syn::Error::new_spanned(
                    &input.ident,
                    "#[derive(KernelParam)] needs named fields: each becomes a PTX parameter \
                     of its name",
                ));
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "#[derive(KernelParam)] supports structs with named fields",
            ));
        }
    };
    let krate = quote!(::dsl_core);
    let declares = fields.iter().map(|f| {
        let id = f.ident.as_ref().expect("named field");
        let ty = &f.ty;
        let name = id.to_string();
        quote!(#id: <#ty as #krate::trace::KernelParam>::declare(#name))
    });
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #krate::trace::KernelParam for #ident #ty_generics #where_clause {
            #[track_caller]
            fn declare(_name: &str) -> Self {
                #ident { #(#declares),* }
            }
        }
    })
}
