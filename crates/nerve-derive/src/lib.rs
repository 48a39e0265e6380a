//! Derive macros for Nerve messages.
//!
//! * `#[derive(Pod)]` marks a `#[repr(C)]` struct without padding whose fields are all
//!   plain data, so any bit pattern is a valid value and it can live in shared memory.
//! * `#[derive(Message)]` additionally gives the struct a type identity (name and layout
//!   hash) so it can be sent on a topic. `#[message(name = "pkg/Type")]` overrides the name;
//!   `#[message(elem = T)]` makes it a header + slice message whose payload is followed by
//!   a variable-length `[T]`.
//!
//! Use them through `nerve::Pod` / `nerve::Message`, which re-export these derives.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, LitStr, Type};

/// Derives `nerve::Pod` for a `#[repr(C)]` struct of plain-data fields without padding.
#[proc_macro_derive(Pod)]
pub fn derive_pod(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match pod_impl(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Derives `nerve::Pod` and `nerve::Message` (type identity for topics).
#[proc_macro_derive(Message, attributes(message))]
pub fn derive_message(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let pod = match pod_impl(&input) {
        Ok(ts) => ts,
        Err(e) => return e.to_compile_error().into(),
    };
    let msg = match message_impl(&input) {
        Ok(ts) => ts,
        Err(e) => return e.to_compile_error().into(),
    };
    quote!(#pod #msg).into()
}

fn has_repr_c(input: &DeriveInput) -> bool {
    input.attrs.iter().any(|a| {
        if !a.path().is_ident("repr") {
            return false;
        }
        let mut found = false;
        let _ = a.parse_nested_meta(|m| {
            if m.path.is_ident("C") {
                found = true;
            }
            Ok(())
        });
        found
    })
}

fn pod_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "nerve: Pod/Message cannot be derived for generic types",
        ));
    }
    if !has_repr_c(input) {
        return Err(syn::Error::new_spanned(
            name,
            "nerve: Pod/Message needs #[repr(C)] so the layout is the same in every process",
        ));
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            Fields::Unnamed(f) => f.unnamed.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
        },
        _ => {
            return Err(syn::Error::new_spanned(
                name,
                "nerve: Pod/Message can only be derived for structs",
            ))
        }
    };
    let types: Vec<&Type> = fields.iter().map(|f| &f.ty).collect();
    let names: Vec<String> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.ident
                .as_ref()
                .map(|i| i.to_string())
                .unwrap_or_else(|| i.to_string())
        })
        .collect();
    let type_name = name.to_string();
    let members: Vec<TokenStream2> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match &f.ident {
            Some(id) => quote!(#id),
            None => {
                let idx = syn::Index::from(i);
                quote!(#idx)
            }
        })
        .collect();
    Ok(quote! {
        // SAFETY: the struct is #[repr(C)], every field is `Pod` (checked by the bound below)
        // and the assertion proves there is no padding, so every bit pattern is valid.
        unsafe impl ::nerve::Pod for #name {
            const LAYOUT_HASH: u64 = {
                let mut h = ::nerve::message::layout::hash_str(::nerve::message::layout::FNV_OFFSET, #type_name);
                h = ::nerve::message::layout::hash_u64(h, ::core::mem::size_of::<#name>() as u64);
                h = ::nerve::message::layout::hash_u64(h, ::core::mem::align_of::<#name>() as u64);
                #(
                    h = ::nerve::message::layout::hash_str(h, #names);
                    h = ::nerve::message::layout::hash_u64(h, <#types as ::nerve::Pod>::LAYOUT_HASH);
                )*
                h
            };
            fn shape() -> ::nerve::message::schema::Shape {
                ::nerve::message::schema::Shape::Struct(::nerve::message::schema::StructShape {
                    name: #type_name.to_string(),
                    size: ::core::mem::size_of::<#name>(),
                    align: ::core::mem::align_of::<#name>(),
                    fields: vec![#(
                        ::nerve::message::schema::Field {
                            name: #names.to_string(),
                            offset: ::core::mem::offset_of!(#name, #members),
                            shape: <#types as ::nerve::Pod>::shape(),
                        }
                    ),*],
                })
            }
        }
        const _: () = {
            const fn assert_pod<T: ::nerve::Pod>() {}
            #( assert_pod::<#types>(); )*
            assert!(
                ::core::mem::size_of::<#name>() == 0 #( + ::core::mem::size_of::<#types>() )*,
                "nerve: a Pod struct must have no padding; add explicit padding fields"
            );
        };
    })
}

fn message_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let mut type_name: Option<String> = None;
    let mut elem: Option<Type> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("message")) {
        attr.parse_nested_meta(|m| {
            if m.path.is_ident("name") {
                let s: LitStr = m.value()?.parse()?;
                type_name = Some(s.value());
                Ok(())
            } else if m.path.is_ident("elem") {
                elem = Some(m.value()?.parse()?);
                Ok(())
            } else {
                Err(m.error("nerve: unknown message attribute, expected `name` or `elem`"))
            }
        })?;
    }
    let type_name = type_name.unwrap_or_else(|| name.to_string());
    let elem = elem
        .map(|t| quote!(#t))
        .unwrap_or_else(|| quote!(::nerve::message::NoElem));
    Ok(quote! {
        impl ::nerve::Message for #name {
            const TYPE_NAME: &'static str = #type_name;
            type Elem = #elem;
        }
        const _: () = ::nerve::message::assert_supported_layout::<#name>();
    })
}
