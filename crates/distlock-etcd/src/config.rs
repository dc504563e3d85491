//! `etcd://` URLs: the cluster's members, the key prefix, the session lease's TTL,
//! credentials and TLS.

use std::time::Duration;

use distlock_core::backend::UrlParams;
use distlock_core::{Error, Result, Url, redact_url};

/// The TTL of the session lease unless the URL says otherwise.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_etcd::DEFAULT_SESSION_TTL.as_secs(), 10);
/// ```
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(10);

/// The key prefix locks live under unless the URL names one.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_etcd::DEFAULT_PREFIX, "distlock");
/// ```
pub const DEFAULT_PREFIX: &str = "distlock";

/// The shortest and longest session TTLs a URL may ask for, in whole seconds (etcd's lease
/// TTLs are whole seconds; a server may raise a short one to its own minimum).
const SESSION_TTLS: std::ops::RangeInclusive<u64> = 1..=3600;

/// How to reach etcd, parsed from
/// `etcd://[user:password@]h1:2379,h2:2379[/prefix][?session_ttl=10s]`, or
/// `etcds://…?tls_ca=ca.pem` over TLS (the members' certificates must chain to the authority
/// in `tls_ca` and name the host connected to).
///
/// The path is the key prefix every lock lives under (default [`DEFAULT_PREFIX`]): a lock
/// named `orders/42` queues its contenders under `<prefix>/orders/42/`, the prefix
/// `etcdctl lock <prefix>/orders/42` uses. The path's leading slash is not part of it:
/// `?prefix=/locks` names a prefix verbatim, slash and all, for Go programs that lock
/// `/locks/…` (as does a path with a second slash, `etcd://h//locks`).
/// `user:password` authenticates every request. `session_ttl` (whole seconds, 1 s to 1 h,
/// default [`DEFAULT_SESSION_TTL`]) is the TTL asked for the session lease.
///
/// # Examples
///
/// ```
/// use distlock_etcd::EtcdConfig;
/// let url = distlock_core::parse_lock_url("etcd://app:s3cret@a:2379,b:2379/locks/app?session_ttl=4s")?;
/// let config = EtcdConfig::from_url(&url)?;
/// assert_eq!(config.endpoints, ["http://a:2379", "http://b:2379"]);
/// assert_eq!(config.prefix, "locks/app");
/// assert_eq!(config.session_ttl.as_secs(), 4);
/// assert!(!format!("{config:?}").contains("s3cret"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct EtcdConfig {
    /// The members' gRPC endpoints (`http://host:port`, or `https://` over TLS).
    pub endpoints: Vec<String>,
    /// The key prefix every lock lives under, without a trailing slash.
    pub prefix: String,
    /// The session lease's TTL to ask for.
    pub session_ttl: Duration,
    /// `user` and `password`, sent to authenticate.
    pub(crate) credentials: Option<(String, String)>,
    /// For `etcds://`: the PEM file of the certificate authority the members' certificates
    /// must chain to (`tls_ca`); TLS is used exactly when it is set.
    pub tls_ca: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("session_ttl", &self.session_ttl)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("tls_ca", &self.tls_ca)
            .finish()
    }
}

impl EtcdConfig {
    /// Parses an `etcd://` or `etcds://` URL (after [`distlock_core::parse_lock_url`],
    /// which carries a list of hosts in the `hosts` parameter).
    ///
    /// # Examples
    ///
    /// ```
    /// let url = distlock_core::Url::parse("etcd://127.0.0.1:2379").unwrap();
    /// let config = distlock_etcd::EtcdConfig::from_url(&url)?;
    /// assert_eq!(config.prefix, distlock_etcd::DEFAULT_PREFIX);
    /// let bad = distlock_core::Url::parse("etcd://127.0.0.1:2379/a?session_ttl=1500ms").unwrap();
    /// assert!(distlock_etcd::EtcdConfig::from_url(&bad).is_err());
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn from_url(url: &Url) -> Result<Self> {
        let refuse = |why: String| {
            Error::invalid(format!(
                "{why}; etcd URLs are etcd://[user:password@]host:port[,host:port…][/prefix][?session_ttl=10s], or etcds://…?tls_ca=ca.pem for TLS, not `{}`",
                redact_url(url.as_str())
            ))
        };
        let tls = match url.scheme() {
            "etcd" => false,
            "etcds" => true,
            other => {
                return Err(refuse(format!(
                    "scheme `{other}` is neither etcd nor etcds"
                )));
            }
        };
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(refuse("an etcd URL needs a host".into()));
        };
        let mut params = UrlParams::of(url).map_err(|err| refuse(err.message().to_owned()))?;
        let hosts = params
            .text("hosts")
            .unwrap_or_else(|| format!("{host}:{}", url.port().unwrap_or(2379)));
        let verbatim_prefix = params.text("prefix");
        let session_ttl = match params.text("session_ttl") {
            None => DEFAULT_SESSION_TTL,
            Some(value) => humantime::parse_duration(&value)
                .ok()
                .filter(|ttl| ttl.subsec_nanos() == 0 && SESSION_TTLS.contains(&ttl.as_secs()))
                .ok_or_else(|| {
                    refuse(format!(
                        "session_ttl `{value}` is not a whole number of seconds from 1s to 1h (etcd's leases count in seconds)"
                    ))
                })?,
        };
        let mut tls_ca = None;
        if let Some(ca) = params.text("tls_ca") {
            if !tls {
                return Err(refuse("tls_ca is for etcds:// (TLS)".into()));
            }
            tls_ca = Some(std::path::PathBuf::from(ca));
        }
        params
            .finish()
            .map_err(|err| refuse(err.message().to_owned()))?;
        if tls && tls_ca.is_none() {
            return Err(refuse(
                "etcds:// needs tls_ca, the PEM file of the members' certificate authority".into(),
            ));
        }
        let scheme = if tls { "https" } else { "http" };
        let endpoints = hosts
            .split(',')
            .map(|member| match member.trim() {
                "" => Err(refuse("the list of members has an empty entry".into())),
                // A bracketed IPv6 address has colons of its own; a port follows `]:`.
                member if member.starts_with('[') && !member.contains("]:") => {
                    Ok(format!("{scheme}://{member}:2379"))
                }
                member if member.contains(':') => Ok(format!("{scheme}://{member}")),
                member => Ok(format!("{scheme}://{member}:2379")),
            })
            .collect::<Result<Vec<_>>>()?;
        let path = distlock_core::backend::url_path(url).map_err(|why| refuse(why.into()))?;
        let path = path.strip_prefix('/').unwrap_or(&path);
        let prefix = match (path.trim_end_matches('/'), verbatim_prefix) {
            ("", None) => DEFAULT_PREFIX.to_owned(),
            (prefix, None) => prefix.to_owned(),
            ("", Some(verbatim)) => match verbatim.trim_end_matches('/') {
                "" => return Err(refuse("prefix must name a key prefix, not be empty".into())),
                verbatim if verbatim.contains(char::is_control) => {
                    return Err(refuse("prefix has a control character".into()));
                }
                verbatim => verbatim.to_owned(),
            },
            (_, Some(_)) => {
                return Err(refuse(
                    "the key prefix is given twice, as the path and as ?prefix=; give one".into(),
                ));
            }
        };
        let credentials =
            distlock_core::backend::url_credentials(url).map_err(|why| refuse(why.into()))?;
        Ok(EtcdConfig {
            endpoints,
            prefix,
            session_ttl,
            credentials,
            tls_ca,
        })
    }

    /// The members, `host:port` separated by commas, for messages.
    pub(crate) fn members(&self) -> String {
        self.endpoints
            .iter()
            .map(|e| e.split_once("://").map_or(e.as_str(), |(_, rest)| rest))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<EtcdConfig> {
        EtcdConfig::from_url(&distlock_core::parse_lock_url(url)?)
    }

    #[test]
    fn a_password_with_url_characters_never_shows() {
        for password in ["p@ss", "a:b", "x%2Fy", "q%40r"] {
            let url = format!("etcd://user:{password}@127.0.0.1:1/p?bogus=1");
            let err = parse(&url).unwrap_err().to_string();
            let decoded = percent_encoding::percent_decode_str(password)
                .decode_utf8()
                .unwrap();
            assert!(!err.contains(password) && !err.contains(&*decoded), "{err}");
            let config = parse(&format!("etcd://user:{password}@127.0.0.1:1/p")).unwrap();
            assert_eq!(
                config.credentials,
                Some(("user".to_owned(), decoded.clone().into_owned()))
            );
            assert!(!format!("{config:?}").contains(&*decoded));
        }
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("etcd:///p", "needs a host"),
            ("etcd://h:1/a?session_ttl=0s", "session_ttl"),
            ("etcd://h:1/a?session_ttl=2h", "session_ttl"),
            ("etcd://h:1/a?session_ttl=1500ms", "whole number"),
            ("etcd://h:1/a?session_ttl=soon", "session_ttl"),
            ("etcd://h:1/a?base=x", "unknown parameter"),
            ("etcds://h:1/a", "needs tls_ca"),
            ("etcd://h:1/a?tls_ca=ca.pem", "is for etcds://"),
            ("etcdx://h:1/a", "neither etcd nor etcds"),
            ("etcd://a:1,,b:2/a", "empty entry"),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), distlock_core::ErrorKind::InvalidInput);
            assert!(err.to_string().contains(why), "{url}: {err}");
        }
    }

    #[test]
    fn the_path_is_the_prefix() {
        assert_eq!(parse("etcd://h:1/").unwrap().prefix, DEFAULT_PREFIX);
        assert_eq!(parse("etcd://h:1").unwrap().prefix, DEFAULT_PREFIX);
        assert_eq!(parse("etcd://h:1/a/b/").unwrap().prefix, "a/b");
        assert_eq!(parse("etcd://h:1//locks").unwrap().prefix, "/locks");
        assert_eq!(parse("etcd://h:1?prefix=/locks").unwrap().prefix, "/locks");
        assert_eq!(
            parse("etcd://h:1/?prefix=/locks/").unwrap().prefix,
            "/locks"
        );
        assert_eq!(parse("etcd://h:1?prefix=a%2Fb").unwrap().prefix, "a/b");
        for (url, why) in [
            ("etcd://h:1/x?prefix=/y", "given twice"),
            ("etcd://h:1?prefix=", "not be empty"),
            ("etcd://h:1?prefix=%0A", "control character"),
        ] {
            let err = parse(url).unwrap_err();
            assert!(err.to_string().contains(why), "{url}: {err}");
        }
        let config = parse("etcds://a:1,b:2/x?tls_ca=ca.pem").unwrap();
        assert_eq!(config.endpoints, ["https://a:1", "https://b:2"]);
        assert_eq!(config.members(), "a:1,b:2");
        assert_eq!(parse("etcd://a/x").unwrap().endpoints, ["http://a:2379"]);
        assert_eq!(
            parse("etcd://[::1],[::1]:2380,h/x").unwrap().endpoints,
            ["http://[::1]:2379", "http://[::1]:2380", "http://h:2379"]
        );
    }
}
