//! `#[derive(Carry)]`: a struct is carried field by field.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Index};

pub fn derive(item: TokenStream) -> TokenStream {
    match expand(item) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(item: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(item)?;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Carry)] supports structs; implement Carry by hand for enums",
        ));
    };
    let krate = quote!(::dsl_core);
    let members: Vec<TokenStream> = match &data.fields {
        Fields::Named(n) => n
            .named
            .iter()
            .map(|f| {
                let id = f.ident.as_ref().expect("named field");
                quote!(#id)
            })
            .collect(),
        Fields::Unnamed(u) => (0..u.unnamed.len())
            .map(|i| {
                let idx = Index::from(i);
                quote!(#idx)
            })
            .collect(),
        Fields::Unit => Vec::new(),
    };
    let names: Vec<String> = members.iter().map(|m| m.to_string()).collect();
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    for tp in generics.type_params_mut() {
        tp.bounds.push(syn::parse_quote!(#krate::trace::Carry));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let rebuild = match &data.fields {
        Fields::Named(_) => quote!(#ident { #(#members: self.#members.rebuild(regs)),* }),
        Fields::Unnamed(_) => quote!(#ident ( #(self.#members.rebuild(regs)),* )),
        Fields::Unit => quote!(#ident),
    };
    Ok(quote! {
        impl #impl_generics #krate::trace::Carry for #ident #ty_generics #where_clause {
            fn regs(&self, out: &mut ::std::vec::Vec<#krate::ir::Reg>) {
                #(#krate::trace::Carry::regs(&self.#members, out);)*
            }
            fn rebuild(
                &self,
                regs: &mut dyn ::std::iter::Iterator<Item = #krate::ir::Reg>,
            ) -> Self {
                use #krate::trace::Carry as _;
                #rebuild
            }
            fn static_diff(&self, other: &Self) -> ::std::option::Option<::std::string::String> {
                #(
                    if let ::std::option::Option::Some(d) =
                        #krate::trace::Carry::static_diff(&self.#members, &other.#members)
                    {
                        return ::std::option::Option::Some(::std::format!("{}: {}", #names, d));
                    }
                )*
                ::std::option::Option::None
            }
        }
    })
}
