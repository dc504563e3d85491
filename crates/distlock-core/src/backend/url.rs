//! What a backend reads from its lock URL: the query parameters ([`UrlParams`], one parser
//! for every backend), durations within a range, the credentials and the path.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

use url::Url;

use super::fence_ttl::{DEFAULT_FENCE_TTL, parse_fence_ttl};
use crate::error::{Error, Result};

/// The query parameters of a lock URL, read by the backend they belong to: each taken by
/// name (as text, as a duration or a whole number within a range), then
/// [`finish`](UrlParams::finish) refuses any left, naming those the backend reads. A
/// parameter given twice is refused at once, so `?pool=4&pool=64` is never read as either.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::UrlParams;
///
/// let url = distlock_core::parse_lock_url("demo://h/?pool=4&wait=2s")?;
/// let mut params = UrlParams::of(&url)?;
/// assert_eq!(params.number("pool", 1..=64u32)?, Some(4));
/// assert_eq!(params.duration("wait", Duration::ZERO..=Duration::from_secs(60))?, Some(Duration::from_secs(2)));
/// assert_eq!(params.text("prefix"), None);
/// params.finish()?;
///
/// let url = distlock_core::parse_lock_url("demo://h/?pol=4")?;
/// let mut params = UrlParams::of(&url)?;
/// assert_eq!(params.number("pool", 1..=64u32)?, None);
/// let err = params.finish().unwrap_err();
/// assert_eq!(err.message(), "unknown parameter `pol` (known: pool)");
///
/// let url = distlock_core::parse_lock_url("demo://h/?pool=4&pool=64")?;
/// assert_eq!(UrlParams::of(&url).unwrap_err().message(), "parameter `pool` is given twice");
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug)]
pub struct UrlParams {
    left: Vec<(String, String)>,
    known: Vec<&'static str>,
}

impl UrlParams {
    /// The query parameters of `url`, decoded; a parameter given twice is refused.
    ///
    /// # Examples
    ///
    /// See [`UrlParams`].
    pub fn of(url: &Url) -> Result<Self> {
        let mut left: Vec<(String, String)> = Vec::new();
        for (key, value) in url.query_pairs() {
            if left.iter().any(|(seen, _)| *seen == key) {
                return Err(Error::invalid(format!("parameter `{key}` is given twice")));
            }
            left.push((key.into_owned(), value.into_owned()));
        }
        Ok(UrlParams {
            left,
            known: Vec::new(),
        })
    }

    /// Takes parameter `key` as text, if the URL has it; either way `key` is one this
    /// backend reads.
    ///
    /// # Examples
    ///
    /// See [`UrlParams`].
    pub fn text(&mut self, key: &'static str) -> Option<String> {
        self.known(key);
        let at = self.left.iter().position(|(name, _)| name == key)?;
        Some(self.left.remove(at).1)
    }

    /// Takes parameter `key` as a duration within `range` (see [`duration_within`]).
    ///
    /// # Examples
    ///
    /// See [`UrlParams`].
    pub fn duration(
        &mut self,
        key: &'static str,
        range: RangeInclusive<Duration>,
    ) -> Result<Option<Duration>> {
        self.text(key)
            .map(|value| duration_within(key, &value, range))
            .transpose()
    }

    /// Takes parameter `key` as a whole number within `range`; otherwise an `InvalidInput`
    /// error naming the parameter, the value and the range.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::UrlParams;
    /// let url = distlock_core::parse_lock_url("demo://h/?pool=0")?;
    /// let err = UrlParams::of(&url)?.number("pool", 1..=64u32).unwrap_err();
    /// assert_eq!(err.message(), "pool `0` is not a whole number from 1 to 64");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn number<T>(&mut self, key: &'static str, range: RangeInclusive<T>) -> Result<Option<T>>
    where
        T: FromStr + PartialOrd + Display,
    {
        let Some(value) = self.text(key) else {
            return Ok(None);
        };
        value
            .parse::<T>()
            .ok()
            .filter(|number| range.contains(number))
            .map(Some)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{key} `{value}` is not a whole number from {} to {}",
                    range.start(),
                    range.end()
                ))
            })
    }

    /// Notes `key` as one this backend reads without taking it (one it reads only in some
    /// forms of its URL, say), so [`finish`](UrlParams::finish) names it among the known.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::UrlParams;
    /// let url = distlock_core::parse_lock_url("demo://h/?x=1")?;
    /// let mut params = UrlParams::of(&url)?;
    /// params.known("tls_ca");
    /// assert_eq!(params.finish().unwrap_err().message(), "unknown parameter `x` (known: tls_ca)");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn known(&mut self, key: &'static str) {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
    }

    /// The parameters no one took, in the URL's order, for a driver that reads its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::UrlParams;
    /// let url = distlock_core::parse_lock_url("demo://h/?pool=4&sslmode=require")?;
    /// let mut params = UrlParams::of(&url)?;
    /// params.text("pool");
    /// assert_eq!(params.into_rest(), [("sslmode".to_owned(), "require".to_owned())]);
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn into_rest(self) -> Vec<(String, String)> {
        self.left
    }

    /// The first parameter no one took, for a backend that refuses it in words of its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::UrlParams;
    /// let url = distlock_core::parse_lock_url("demo://h/?pool=4&pol=4")?;
    /// let mut params = UrlParams::of(&url)?;
    /// params.text("pool");
    /// assert_eq!(params.unknown(), Some("pol"));
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn unknown(&self) -> Option<&str> {
        self.left.first().map(|(key, _)| key.as_str())
    }

    /// Refuses the first parameter no one took, naming those this backend reads.
    ///
    /// # Examples
    ///
    /// See [`UrlParams`].
    pub fn finish(self) -> Result<()> {
        match (self.unknown(), self.known.is_empty()) {
            (None, _) => Ok(()),
            (Some(key), true) => Err(Error::invalid(format!(
                "unknown parameter `{key}`: this URL takes no parameters"
            ))),
            (Some(key), false) => Err(Error::invalid(format!(
                "unknown parameter `{key}` (known: {})",
                self.known.join(", ")
            ))),
        }
    }
}

/// The URL parameter `name`'s `value` as a duration within `range`; otherwise an
/// `InvalidInput` error that names the parameter, the value and the range.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::duration_within;
/// let range = Duration::ZERO..=Duration::from_secs(3600);
/// assert_eq!(duration_within("busy_timeout", "5s", range.clone())?, Duration::from_secs(5));
/// let err = duration_within("busy_timeout", "25days", range.clone()).unwrap_err();
/// assert_eq!(err.message(), "busy_timeout `25days` is not a duration from 0s to 1h");
/// assert!(duration_within("busy_timeout", "soon", range).is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn duration_within(
    name: &str,
    value: &str,
    range: RangeInclusive<Duration>,
) -> Result<Duration> {
    humantime::parse_duration(value)
        .ok()
        .filter(|duration| range.contains(duration))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{name} `{value}` is not a duration from {} to {}",
                humantime::format_duration(*range.start()),
                humantime::format_duration(*range.end())
            ))
        })
}

/// Takes the URL's `fence_ttl` parameter from `params`, or [`DEFAULT_FENCE_TTL`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::{DEFAULT_FENCE_TTL, UrlParams, fence_ttl};
/// let params = |q: &str| UrlParams::of(&distlock_core::Url::parse(&format!("postgres://db/app{q}")).unwrap());
/// assert_eq!(fence_ttl(&mut params("")?)?, DEFAULT_FENCE_TTL);
/// assert_eq!(fence_ttl(&mut params("?fence_ttl=2h")?)?, Duration::from_secs(7200));
/// assert!(fence_ttl(&mut params("?fence_ttl=0s")?).is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn fence_ttl(params: &mut UrlParams) -> Result<Duration> {
    params
        .text("fence_ttl")
        .map_or(Ok(DEFAULT_FENCE_TTL), |value| parse_fence_ttl(&value))
}

/// The `user:password` of a lock URL, percent-decoded (`None` when it has neither), for
/// backends that send them apart from the URL. The error says what is wrong, never the
/// password.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::url_credentials;
/// let url = distlock_core::parse_lock_url("zk://app:p%40ss@h:1/base")?;
/// assert_eq!(url_credentials(&url), Ok(Some(("app".into(), "p@ss".into()))));
/// let url = distlock_core::parse_lock_url("zk://h:1/base")?;
/// assert_eq!(url_credentials(&url), Ok(None));
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn url_credentials(url: &Url) -> std::result::Result<Option<(String, String)>, &'static str> {
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|t| t.into_owned())
            .map_err(|_| "the credentials are not UTF-8")
    };
    match (url.username(), url.password()) {
        ("", None) => Ok(None),
        (user, password) => Ok(Some((decode(user)?, decode(password.unwrap_or(""))?))),
    }
}

/// The path of a lock URL, percent-decoded.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::url_path;
/// let url = distlock_core::parse_lock_url("etcd://h:1/locks/%C3%A9t%C3%A9")?;
/// assert_eq!(url_path(&url), Ok("/locks/été".to_owned()));
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn url_path(url: &Url) -> std::result::Result<String, &'static str> {
    percent_encoding::percent_decode_str(url.path())
        .decode_utf8()
        .map(|path| path.into_owned())
        .map_err(|_| "the path is not UTF-8")
}
