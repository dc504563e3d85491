//! Lock-name templates: `"orders/{order.id}"` becomes `format!("orders/{}", order.id)`, each
//! `{…}` an expression over the function's arguments and `self`, given the literal's span so
//! that a misspelt argument or field is the compiler's ordinary error, pointing at the
//! name.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::quote;
use syn::{Error, Expr, LitStr};

/// The expression that renders `template` (a `String`).
pub fn render(template: &LitStr) -> syn::Result<TokenStream> {
    let text = template.value();
    let span = template.span();
    let mut format = String::new();
    let mut values = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                format.push_str("{{");
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                format.push_str("}}");
            }
            '{' => {
                let mut inner = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed {
                    return Err(Error::new(
                        span,
                        "the lock name has a `{` that is never closed (write `{{` for a brace)",
                    ));
                }
                if inner.trim().is_empty() {
                    return Err(Error::new(
                        span,
                        "the lock name has an empty `{}`: name an argument, a field or a method call, as in `{order.id}`",
                    ));
                }
                let expr: Expr = syn::parse_str(&inner).map_err(|e| {
                    Error::new(
                        span,
                        format!("`{{{inner}}}` in the lock name is not an expression: {e}"),
                    )
                })?;
                let expr = respan(quote!(#expr), span);
                format.push_str("{}");
                values.push(quote!((#expr)));
            }
            '}' => {
                return Err(Error::new(
                    span,
                    "the lock name has a `}` that closes nothing (write `}}` for a brace)",
                ));
            }
            c => format.push(c),
        }
    }
    let format = LitStr::new(&format, span);
    Ok(quote!(::std::format!(#format #(, #values)*)))
}

/// `tokens` with every token given `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut new = Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(span);
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(template: &str) -> syn::Result<String> {
        render(&LitStr::new(template, Span::call_site())).map(|t| t.to_string())
    }

    #[test]
    fn fields_calls_and_indexing_become_format_arguments() {
        let out = rendered("orders/{order.id}/{self.region}/{user.name()}/{ids[0]}").unwrap();
        assert!(out.contains(r#""orders/{}/{}/{}/{}""#), "{out}");
        assert!(out.contains("order . id"), "{out}");
        assert!(out.contains("user . name ()"), "{out}");
        assert!(out.contains("ids [0]"), "{out}");
        let braces = rendered("a{{b}}").unwrap();
        assert!(braces.contains(r#""a{{b}}""#), "{braces}");
    }

    #[test]
    fn malformed_templates_are_refused() {
        for (template, why) in [
            ("orders/{", "never closed"),
            ("orders/{}", "empty"),
            ("orders/}", "closes nothing"),
            ("orders/{a +}", "not an expression"),
        ] {
            let err = rendered(template).unwrap_err().to_string();
            assert!(err.contains(why), "{template}: {err}");
        }
    }
}
