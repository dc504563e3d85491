//! The expansion: the function's body becomes the async closure a lock template runs, under
//! the lock the arguments name.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, GenericArgument, Ident, ItemFn, PathArguments, ReturnType, Type, TypePath};

use crate::args::{Args, Kind, Names, OnBusy};
use crate::template;

/// Expands attribute `kind` with arguments `attr` on `item`.
pub fn expand(kind: Kind, attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse(kind, attr, Span::call_site())?;
    // The expansion's own variables resolve where the macro is defined: the body, written
    // by the user, sees none of them.
    let name_var = Ident::new("__distlock_name", Span::mixed_site());
    let lock_var = Ident::new("__distlock_lock", Span::mixed_site());
    let client_var = Ident::new("__distlock_client", Span::mixed_site());
    let mut function: ItemFn = syn::parse2(item).map_err(|e| {
        Error::new(
            e.span(),
            format!("#[{}] goes on an `async fn`", kind.attribute()),
        )
    })?;
    if function.sig.asyncness.is_none() {
        return Err(Error::new(
            function.sig.fn_token.span(),
            format!(
                "#[{}] goes on an `async fn`: the lock is waited for and held across awaits",
                kind.attribute()
            ),
        ));
    }
    let ReturnType::Type(_, returned) = &function.sig.output else {
        return Err(Error::new(
            function.sig.ident.span(),
            "a locked function returns a `Result` whose error type has `From<distlock::Error>`: \
             taking the lock can fail",
        ));
    };
    if names_impl_trait(quote!(#returned)) {
        return Err(Error::new_spanned(
            returned,
            "a locked function cannot return `impl Trait`: its body runs as a closure, whose \
             return type must be named (name the type, or box it)",
        ));
    }
    let body_returns = match (args.kind, args.on_busy) {
        (Kind::Job, _) => without_wrapper(returned, "JobOutcome", JOB_RETURNS)?,
        (_, OnBusy::Skip) => without_wrapper(returned, "Option", SKIP_RETURNS)?,
        (_, OnBusy::Wait | OnBusy::Error) => {
            result_args(returned)?;
            (**returned).clone()
        }
    };
    let many = matches!(args.names, Names::Many(_));
    let held_type = match many {
        true => quote!(&[::distlock::Held]),
        false => quote!(&::distlock::Held),
    };
    let held = match &args.held {
        Some(name) => quote!(#name),
        None => quote!(_),
    };
    let (names, shown) = match &args.names {
        Names::Template(text) => {
            let name = template::render(text)?;
            (quote!(#name), quote!(#name_var.clone()))
        }
        Names::Key(expr) => (
            quote_spanned!(expr.span()=> ::std::string::ToString::to_string(&(#expr))),
            quote!(#name_var.clone()),
        ),
        Names::Many(templates) => {
            let rendered = templates
                .iter()
                .map(template::render)
                .collect::<syn::Result<Vec<_>>>()?;
            (
                quote!(::std::vec![#(#rendered),*]),
                quote!(#name_var.join(", ")),
            )
        }
    };
    let client = &args.client;
    let options = &args.options;
    let job = &args.job;
    let primitive = match (args.kind, many) {
        (Kind::Mutex, true) => quote!(multi_lock(#name_var.clone())),
        (Kind::Mutex, false) => quote!(mutex(#name_var.clone())),
        (Kind::Read | Kind::Write, _) => quote!(rwlock(#name_var.clone())),
        (Kind::Permits, _) => {
            let size = &args.size;
            quote!(semaphore(#name_var.clone(), #size))
        }
        (Kind::Job, _) => quote!(job(#name_var.clone())),
    };
    let take = match (args.kind, &args.take) {
        (Kind::Permits, Some(take)) => quote!(#take,),
        (Kind::Permits, None) => quote!(1,),
        _ => quote!(),
    };
    let (wait, try_) = match (args.kind, many) {
        (Kind::Mutex, true) => ("with_all", "try_with_all"),
        (Kind::Mutex, false) => ("with_lock", "try_with_lock"),
        (Kind::Read, _) => ("with_read", "try_with_read"),
        (Kind::Write, _) => ("with_write", "try_with_write"),
        (Kind::Permits, _) => ("with_permits", "try_with_permits"),
        (Kind::Job, _) => ("run", "run"),
    };
    let body = &function.block;
    let closure = quote!(async |#held: #held_type| -> #body_returns #body);
    // The call's span is the return type's: an error type without `From<distlock::Error>`
    // is reported there.
    let at = returned.span();
    let call = |method: &str| {
        let method = Ident::new(method, at);
        quote_spanned!(at=> #lock_var.#method(#take #closure).await)
    };
    let run = match args.on_busy {
        OnBusy::Wait => call(wait),
        OnBusy::Skip => call(try_),
        OnBusy::Error => {
            let tried = call(try_);
            quote! {
                match #tried {
                    ::std::result::Result::Ok(::std::option::Option::Some(done)) => {
                        ::std::result::Result::Ok(done)
                    }
                    ::std::result::Result::Ok(::std::option::Option::None) => {
                        ::std::result::Result::Err(::std::convert::From::from(
                            ::distlock::__private::busy(&#shown),
                        ))
                    }
                    ::std::result::Result::Err(err) => ::std::result::Result::Err(err),
                }
            }
        }
    };
    let new_body = quote! {{
        let #name_var = #names;
        let #lock_var = {
            let #client_var = ::distlock::__private::as_client(&(#client));
            #client_var
                .#primitive
                .with_options(::distlock::LockOptions::new() #(#options)*)
                #(#job)*
        };
        #run
    }};
    *function.block = syn::parse2(new_body)?;
    Ok(quote!(#function))
}

/// Whether `tokens` (a type) holds an `impl Trait` anywhere.
fn names_impl_trait(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        proc_macro2::TokenTree::Ident(ident) => ident == "impl",
        proc_macro2::TokenTree::Group(group) => names_impl_trait(group.stream()),
        _ => false,
    })
}

/// The generic arguments of `returned`, a `Result<…>` (by its last path segment, so
/// `std::io::Result<T>` and aliases named `Result` pass too).
fn result_args(returned: &Type) -> syn::Result<&PathArguments> {
    match returned {
        Type::Path(TypePath { path, .. })
            if path.segments.last().is_some_and(|s| s.ident == "Result") =>
        {
            Ok(&path.segments.last().expect("checked").arguments)
        }
        _ => Err(Error::new_spanned(
            returned,
            "a locked function returns a `Result` whose error type has `From<distlock::Error>`: \
             taking the lock can fail",
        )),
    }
}

/// What a function with `on_busy = "skip"` returns.
const SKIP_RETURNS: &str = "with on_busy = \"skip\" the function returns `Result<Option<T>, E>`: \
                            `Ok(None)` when the lock is busy";

/// What a `#[job]` function returns.
const JOB_RETURNS: &str = "a #[job] function returns `Result<distlock::JobOutcome<T>, E>`: its body \
                           gives `Result<T, E>`, and the job says whether it ran";

/// `Result<T, E>` for `returned`, a `Result<Wrapper<T>, E>` whose wrapper is named
/// `wrapper` (`Option` for `on_busy = "skip"`, `JobOutcome` for a job); `refusal` is the
/// error for any other type.
fn without_wrapper(returned: &Type, wrapper: &str, refusal: &str) -> syn::Result<Type> {
    let refuse = || Error::new_spanned(returned, refusal);
    result_args(returned)?;
    let mut body_returns = returned.clone();
    let Type::Path(TypePath { path, .. }) = &mut body_returns else {
        return Err(refuse());
    };
    let PathArguments::AngleBracketed(arguments) =
        &mut path.segments.last_mut().expect("checked").arguments
    else {
        return Err(refuse());
    };
    let Some(GenericArgument::Type(Type::Path(first))) = arguments.args.first_mut() else {
        return Err(refuse());
    };
    let wrapped = first.path.segments.last().filter(|s| s.ident == wrapper);
    let Some(PathArguments::AngleBracketed(inner)) = wrapped.map(|s| &s.arguments) else {
        return Err(refuse());
    };
    let Some(GenericArgument::Type(value)) = inner.args.first().cloned() else {
        return Err(refuse());
    };
    if let Some(slot) = arguments.args.first_mut() {
        *slot = GenericArgument::Type(value);
    }
    Ok(body_returns)
}
