//! Lock URLs as users write them: parsed (a list of hosts included) and shown without
//! their passwords.

use url::Url;

use crate::error::{Error, Result};

/// The URL with any password replaced by `***`, for messages and logs.
///
/// The text is not trusted to be a well-formed URL: a password written into it raw may hold
/// `@`, `:`, `/` or `%`, which move the edges a URL parser would find. So the user
/// information is taken to run to the last `@` of the whole text (the latest it can end),
/// and everything after the user name's first `:` up to there is hidden. A URL whose
/// query or path holds an `@` may thus be shown cut short, but never with a password. Text
/// without a `scheme://` (`app:secret@db`, a URL whose scheme was left out) is read the
/// same way from its start. The value of a `password` query parameter is hidden too.
///
/// # Examples
///
/// ```
/// use distlock_core::redact_url;
/// assert_eq!(redact_url("postgres://app:hunter2@db/locks"), "postgres://app:***@db/locks");
/// assert_eq!(redact_url("redis://:p@ss/w:rd@cache:6379"), "redis://:***@cache:6379");
/// assert_eq!(redact_url("sqlite:///var/lib/locks.db"), "sqlite:///var/lib/locks.db");
/// assert_eq!(redact_url("app:hunter2@db:5432/locks"), "app:***@db:5432/locks");
/// assert_eq!(redact_url("postgres://db/locks?password=hunter2&pool=4"), "postgres://db/locks?password=***&pool=4");
/// assert_eq!(redact_url("postgres://db/locks?pass%77ord=hunter2"), "postgres://db/locks?password=***");
/// ```
pub fn redact_url(url: &str) -> String {
    hide_query_password(&hide_userinfo_password(url))
}

/// `url` with the password of its user information replaced (see [`redact_url`]).
fn hide_userinfo_password(url: &str) -> String {
    let (head, rest) = split_scheme(url).unwrap_or(("", url));
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, hosts) = (&rest[..at], &rest[at + 1..]);
    match (head, userinfo.split_once(':')) {
        (_, None) => url.to_owned(),
        ("", Some((user, _))) => format!("{user}:***@{hosts}"),
        (scheme, Some((user, _))) => format!("{scheme}://{user}:***@{hosts}"),
    }
}

/// `url` with the value of a `password` query parameter (which PostgreSQL's driver reads)
/// replaced.
fn hide_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let parameters: Vec<&str> = query
        .split('&')
        .map(|parameter| match parameter.split_once('=') {
            // Drivers decode the key: `pass%77ord` is `password` too.
            Some((key, _))
                if percent_encoding::percent_decode_str(&key.replace('+', " "))
                    .decode_utf8_lossy()
                    .eq_ignore_ascii_case("password") =>
            {
                "password=***"
            }
            _ => parameter,
        })
        .collect();
    format!("{base}?{}", parameters.join("&"))
}

/// `scheme://rest` as the scheme and the rest, when the text starts with a scheme (a
/// letter, then letters, digits, `+`, `-` or `.`) followed by `://`.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// Parses a lock URL. A list of hosts (`redlock://h1:6379,h2:6379,h3:6379/0`), which URLs
/// cannot hold, becomes the first host with the whole list in the query parameter `hosts`.
///
/// # Examples
///
/// ```
/// let url = distlock_core::parse_lock_url("redlock://:pw@a:1,b:2,c:3/0?x=1")?;
/// assert_eq!(url.host_str(), Some("a"));
/// assert!(url.query_pairs().any(|(k, v)| k == "hosts" && v == "a:1,b:2,c:3"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn parse_lock_url(url: &str) -> Result<Url> {
    let malformed = |e: url::ParseError| {
        Error::invalid(format!("malformed lock URL `{}`: {e}", redact_url(url)))
    };
    let Some((scheme, rest)) = split_scheme(url) else {
        return Url::parse(url).map_err(malformed);
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return Url::parse(url).map_err(malformed);
    }
    let first = hosts.split(',').next().unwrap_or_default();
    let mut parsed =
        Url::parse(&format!("{scheme}://{userinfo}{first}{tail}")).map_err(malformed)?;
    parsed.query_pairs_mut().append_pair("hosts", hosts);
    Ok(parsed)
}
