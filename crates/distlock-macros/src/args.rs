//! The attribute's arguments: `client = …, name = "…" | key = … | names = […], wait = "5s",
//! ttl = "10s", on_busy = "skip", held = h, …`, checked at compile time.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, Ident, Lit, LitStr, MetaNameValue, Token};

/// Which lock the attribute takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `#[locked]`: a mutex, or with `names`, every lock of a multi-lock.
    Mutex,
    /// `#[read_locked]`.
    Read,
    /// `#[write_locked]`.
    Write,
    /// `#[permits(n = …)]`: permits of a semaphore of `n`.
    Permits,
    /// `#[job]`: a job on a mutex, run by one replica at a time.
    Job,
}

impl Kind {
    /// The attribute's name, for messages.
    pub fn attribute(self) -> &'static str {
        match self {
            Kind::Mutex => "locked",
            Kind::Read => "read_locked",
            Kind::Write => "write_locked",
            Kind::Permits => "permits",
            Kind::Job => "job",
        }
    }
}

/// What to do when the lock is held by someone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnBusy {
    /// Wait for it, as long as `wait` says (forever without it).
    Wait,
    /// Return `Ok(None)` at once: the function returns `Result<Option<T>, E>`.
    Skip,
    /// Return the error at once.
    Error,
}

/// Which lock name(s) the function takes.
pub enum Names {
    /// A template over the arguments.
    Template(LitStr),
    /// Any `Display` expression.
    Key(Expr),
    /// A template per lock of an all-or-nothing multi-lock.
    Many(Vec<LitStr>),
}

/// The parsed arguments.
pub struct Args {
    pub kind: Kind,
    pub client: Expr,
    pub names: Names,
    /// `LockOptions` builder calls: `.ttl(…)`, `.fair(…)`, ….
    pub options: Vec<TokenStream>,
    /// For `job`: `Job` builder calls: `.at_least(…)`, `.at_most(…)`, `.once_per(…)`,
    /// `.wait(…)`.
    pub job: Vec<TokenStream>,
    pub on_busy: OnBusy,
    pub held: Option<Ident>,
    /// For `permits`: the semaphore's size, and how many permits the call takes.
    pub size: Option<Expr>,
    pub take: Option<Expr>,
}

/// The `LockOptions` fields that take a duration.
const DURATIONS: [&str; 5] = ["wait", "ttl", "max_hold", "renew_every", "op_timeout"];

/// The `Job` settings that take a duration.
const JOB_DURATIONS: [&str; 4] = ["at_least", "at_most", "once_per", "wait"];

/// The `LockOptions` fields that take a `bool`.
const SWITCHES: [&str; 2] = ["fair", "auto_renew"];

impl Args {
    /// Parses the arguments of attribute `kind` (the tokens inside its parentheses), `span`
    /// the attribute's, for an error that concerns it as a whole.
    pub fn parse(kind: Kind, tokens: TokenStream, span: Span) -> syn::Result<Args> {
        let pairs = syn::parse::Parser::parse2(
            Punctuated::<MetaNameValue, Token![,]>::parse_terminated,
            tokens,
        )?;
        let mut client = None;
        let mut names: Option<Names> = None;
        let mut options = Vec::new();
        let mut job = Vec::new();
        let mut on_busy = OnBusy::Wait;
        let mut held = None;
        let mut size = None;
        let mut take = None;
        let mut seen: Vec<String> = Vec::new();
        for pair in pairs {
            let Some(key) = pair.path.get_ident().map(Ident::to_string) else {
                return Err(Error::new(pair.path.span(), "expected `name = value`"));
            };
            if seen.contains(&key) {
                return Err(Error::new(
                    pair.path.span(),
                    format!("`{key}` is given twice"),
                ));
            }
            seen.push(key.clone());
            let value = pair.value;
            let set_names = |names: &mut Option<Names>, new: Names| {
                if names.is_some() {
                    return Err(Error::new(
                        pair.path.span(),
                        "give one of `name`, `key` and `names`",
                    ));
                }
                *names = Some(new);
                Ok(())
            };
            match key.as_str() {
                "client" => client = Some(value),
                "name" => set_names(&mut names, Names::Template(string(&value, "name")?))?,
                "key" => set_names(&mut names, Names::Key(value))?,
                "names" if kind == Kind::Mutex => {
                    let Expr::Array(array) = &value else {
                        return Err(Error::new(
                            value.span(),
                            "`names` is a list of name templates: names = [\"a/{x}\", \"b/{y}\"]",
                        ));
                    };
                    let templates = array
                        .elems
                        .iter()
                        .map(|e| string(e, "names"))
                        .collect::<syn::Result<Vec<_>>>()?;
                    if templates.is_empty() {
                        return Err(Error::new(value.span(), "`names` names no lock"));
                    }
                    set_names(&mut names, Names::Many(templates))?;
                }
                "held" => match &value {
                    Expr::Path(path) if path.path.get_ident().is_some() => {
                        held = path.path.get_ident().cloned();
                    }
                    _ => {
                        return Err(Error::new(
                            value.span(),
                            "`held` names the variable the body sees the grant as: held = h",
                        ));
                    }
                },
                "on_busy" if kind != Kind::Job => {
                    on_busy = match string(&value, "on_busy")?.value().as_str() {
                        "wait" => OnBusy::Wait,
                        "skip" => OnBusy::Skip,
                        "error" => OnBusy::Error,
                        other => {
                            return Err(Error::new(
                                value.span(),
                                format!(
                                    "on_busy is \"wait\", \"skip\" or \"error\", not \"{other}\""
                                ),
                            ));
                        }
                    };
                }
                "on_lost" => {
                    let on_lost = match string(&value, "on_lost")?.value().as_str() {
                        "cancel" => quote!(::distlock::OnLost::Cancel),
                        "signal" => quote!(::distlock::OnLost::Signal),
                        other => {
                            return Err(Error::new(
                                value.span(),
                                format!("on_lost is \"cancel\" or \"signal\", not \"{other}\""),
                            ));
                        }
                    };
                    options.push(quote!(.on_lost(#on_lost)));
                }
                "reentrant" if kind != Kind::Job => options.push(quote!(.reentrant(#value))),
                field if kind == Kind::Job && JOB_DURATIONS.contains(&field) => {
                    let (secs, nanos) = duration(&value, field)?;
                    let method = Ident::new(field, pair.path.span());
                    job.push(quote!(.#method(::std::time::Duration::new(#secs, #nanos))));
                }
                "n" if kind == Kind::Permits => size = Some(value),
                "take" if kind == Kind::Permits => take = Some(value),
                field if DURATIONS.contains(&field) => {
                    let (secs, nanos) = duration(&value, field)?;
                    let method = Ident::new(field, pair.path.span());
                    options.push(quote!(.#method(::std::time::Duration::new(#secs, #nanos))));
                }
                field if SWITCHES.contains(&field) => {
                    let Expr::Lit(ExprLit {
                        lit: Lit::Bool(on), ..
                    }) = &value
                    else {
                        return Err(Error::new(
                            value.span(),
                            format!("`{field}` is true or false"),
                        ));
                    };
                    let method = Ident::new(field, pair.path.span());
                    options.push(quote!(.#method(#on)));
                }
                other => {
                    let mut known = vec!["client", "name", "key"];
                    if kind == Kind::Mutex {
                        known.push("names");
                    }
                    if kind == Kind::Permits {
                        known.extend(["n", "take"]);
                    }
                    match kind {
                        Kind::Job => {
                            known.extend(["held", "on_lost"]);
                            known.extend(JOB_DURATIONS);
                        }
                        _ => known.extend(["held", "on_busy", "on_lost", "reentrant"]),
                    }
                    let options: Vec<&str> = DURATIONS
                        .into_iter()
                        .filter(|d| !known.contains(d))
                        .collect();
                    known.extend(options);
                    known.extend(SWITCHES);
                    return Err(Error::new(
                        pair.path.span(),
                        format!(
                            "unknown argument `{other}` of #[{}] (known: {})",
                            kind.attribute(),
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        let Some(client) = client else {
            return Err(Error::new(
                span,
                format!(
                    "#[{}] needs `client = …`, an expression giving the distlock client (a \
                     `&Client` or an `Arc<Client>`), such as `client = self.locks`",
                    kind.attribute()
                ),
            ));
        };
        let Some(names) = names else {
            return Err(Error::new(
                span,
                format!(
                    "#[{}] needs the lock's name: `name = \"orders/{{order.id}}\"` (a template \
                     over the arguments) or `key = <expression>`",
                    kind.attribute()
                ),
            ));
        };
        if kind == Kind::Permits && size.is_none() {
            return Err(Error::new(
                span,
                "#[permits] needs `n = …`, the number of permits the semaphore has",
            ));
        }
        Ok(Args {
            kind,
            client,
            names,
            options,
            job,
            on_busy,
            held,
            size,
            take,
        })
    }
}

/// The string literal `value` of argument `key`.
fn string(value: &Expr, key: &str) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Ok(text.clone()),
        _ => Err(Error::new(
            value.span(),
            format!("`{key}` takes a string literal"),
        )),
    }
}

/// The duration `value` of argument `key` ("5s", "1m 30s", "250ms"), as seconds and
/// nanoseconds.
fn duration(value: &Expr, key: &str) -> syn::Result<(u64, u32)> {
    let text = string(value, key)?;
    let parsed: Duration = humantime::parse_duration(&text.value()).map_err(|e| {
        Error::new(
            text.span(),
            format!("`{key}` is not a duration: {e} (write it as \"5s\", \"250ms\" or \"1m 30s\")"),
        )
    })?;
    Ok((parsed.as_secs(), parsed.subsec_nanos()))
}
