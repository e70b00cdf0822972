//! The `#[profile]` attribute of mtrace, re-exported as `mtrace::profile`.
//!
//! It turns
//!
//! ```text
//! #[profile]
//! fn parse(text: &str) -> usize { body }
//! ```
//!
//! into a function whose body first opens a frame of a `static` call site
//! (registered once, on first use) and closes it when the body returns or
//! unwinds:
//!
//! ```text
//! fn parse(text: &str) -> usize {
//!     let guard = { static SITE: mtrace::CallSite = mtrace::CallSite::new("parse", file!(), line!(), module_path!());
//!                   mtrace::ScopeGuard::enter(&SITE) };
//!     { body }
//! }
//! ```
//!
//! An `async fn`'s body is wrapped in a future that opens the frame at its
//! first poll and closes it when the body completes or is dropped. The
//! generated code names the `mtrace` crate by its path `::mtrace`.
#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::{parse_macro_input, ItemFn, LitStr};

/// Instruments a function with an mtrace frame. See `mtrace::profile`.
#[proc_macro_attribute]
pub fn profile(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut name: Option<LitStr> = None;
    let args = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            name = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error("unknown #[profile] argument; the only one is `name = \"...\"`"))
        }
    });
    parse_macro_input!(attr with args);
    let mut function: ItemFn = match syn::parse(item) {
        Ok(f) => f,
        Err(e) => {
            return syn::Error::new(
                e.span(),
                "#[mtrace::profile] goes on a function or method with a body",
            )
            .to_compile_error()
            .into()
        }
    };
    if let Some(constness) = function.sig.constness {
        return syn::Error::new_spanned(
            constness,
            "#[mtrace::profile] cannot instrument a `const fn`",
        )
        .to_compile_error()
        .into();
    }
    let ident = &function.sig.ident;
    let name = name.unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    // `line!()` spanned at the function's name reports the line of `fn name`.
    let line = quote_spanned!(ident.span()=> line!());
    let site = quote! {
        static __MTRACE_SITE: ::mtrace::CallSite =
            ::mtrace::CallSite::new(#name, file!(), #line, module_path!());
    };
    let body = &function.block;
    let new_body = if function.sig.asyncness.is_some() {
        quote! {{
            #site
            ::mtrace::__private::ProfiledFuture::new(&__MTRACE_SITE, async move #body).await
        }}
    } else {
        let guard = syn::Ident::new("__mtrace_guard", Span::mixed_site());
        quote! {{
            let #guard = {
                #site
                ::mtrace::ScopeGuard::enter(&__MTRACE_SITE)
            };
            #body
        }}
    };
    function.block = match syn::parse2(new_body) {
        Ok(block) => Box::new(block),
        Err(e) => return e.to_compile_error().into(),
    };
    quote!(#function).into()
}
