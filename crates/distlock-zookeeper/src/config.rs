//! `zk://` URLs: the ensemble, the base path, the session timeout and digest credentials.

use std::time::Duration;

use distlock_core::backend::UrlParams;
use distlock_core::{Error, Result, Url, redact_url};

/// The session timeout asked of the server unless the URL says otherwise (the server may
/// grant another, within its own `minSessionTimeout`..`maxSessionTimeout`).
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_zookeeper::DEFAULT_SESSION_TIMEOUT.as_secs(), 10);
/// ```
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The base path locks live under unless the URL names one.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_zookeeper::DEFAULT_BASE, "/distlock");
/// ```
pub const DEFAULT_BASE: &str = "/distlock";

/// The shortest and longest session timeouts a URL may ask for.
const SESSION_TIMEOUTS: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(200)..=Duration::from_secs(3600);

/// How to reach ZooKeeper, parsed from
/// `zk://[user:password@]h1:2181,h2:2181,h3:2181[/base][?session_timeout=10s]`, or
/// `zks://…?tls_ca=ca.pem` for TLS (the servers' secure client ports; their certificates
/// must chain to the authority in `tls_ca` and name the host connected to).
///
/// The path is the base every lock lives under (default [`DEFAULT_BASE`]); a lock named
/// `orders/42` is the node `<base>/orders/42`, where its contenders queue. `user:password`
/// is sent as `digest` credentials on every connection, and then the nodes the client
/// creates are that identity's alone (`creator_all`). `session_timeout` (200 ms to 1 h,
/// default [`DEFAULT_SESSION_TIMEOUT`]) is what the client asks the server for.
///
/// # Examples
///
/// ```
/// use distlock_zookeeper::ZkConfig;
/// let url = distlock_core::parse_lock_url("zk://app:s3cret@a:2181,b:2181/locks/app?session_timeout=4s")?;
/// let config = ZkConfig::from_url(&url)?;
/// assert_eq!(config.hosts, "a:2181,b:2181");
/// assert_eq!(config.base, "/locks/app");
/// assert_eq!(config.session_timeout.as_secs(), 4);
/// assert!(!format!("{config:?}").contains("s3cret"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct ZkConfig {
    /// The ensemble's members, `host:port` separated by commas.
    pub hosts: String,
    /// The absolute path every lock lives under, without a trailing slash (never the root:
    /// ZooKeeper keeps its own node `/zookeeper` there).
    pub base: String,
    /// The session timeout to ask for.
    pub session_timeout: Duration,
    /// `digest` credentials, `user:password`.
    pub(crate) digest: Option<String>,
    /// For `zks://`: the PEM file of the certificate authority the servers' certificates
    /// must chain to (`tls_ca`); TLS is used exactly when it is set.
    pub tls_ca: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkConfig")
            .field("hosts", &self.hosts)
            .field("base", &self.base)
            .field("session_timeout", &self.session_timeout)
            .field("digest", &self.digest.as_ref().map(|_| "***"))
            .field("tls_ca", &self.tls_ca)
            .finish()
    }
}

impl ZkConfig {
    /// Parses a `zk://` URL (after [`distlock_core::parse_lock_url`], which carries a list
    /// of hosts in the `hosts` parameter).
    ///
    /// # Examples
    ///
    /// ```
    /// let url = distlock_core::Url::parse("zk://127.0.0.1:2181").unwrap();
    /// let config = distlock_zookeeper::ZkConfig::from_url(&url)?;
    /// assert_eq!(config.base, distlock_zookeeper::DEFAULT_BASE);
    /// let bad = distlock_core::Url::parse("zk://127.0.0.1:2181/a?session_timeout=1ms").unwrap();
    /// assert!(distlock_zookeeper::ZkConfig::from_url(&bad).is_err());
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn from_url(url: &Url) -> Result<Self> {
        let refuse = |why: String| {
            Error::invalid(format!(
                "{why}; ZooKeeper URLs are zk://[user:password@]host:port[,host:port…][/base][?session_timeout=10s], or zks://…?tls_ca=ca.pem for TLS, not `{}`",
                redact_url(url.as_str())
            ))
        };
        let tls = match url.scheme() {
            "zk" => false,
            "zks" => true,
            other => return Err(refuse(format!("scheme `{other}` is neither zk nor zks"))),
        };
        let mut tls_ca = None;
        let host = url.host_str().filter(|h| !h.is_empty());
        let Some(host) = host else {
            return Err(refuse("a ZooKeeper URL needs a host".into()));
        };
        let mut params = UrlParams::of(url).map_err(|err| refuse(err.message().to_owned()))?;
        let hosts = params
            .text("hosts")
            .unwrap_or_else(|| format!("{host}:{}", url.port().unwrap_or(2181)));
        let session_timeout = params
            .duration("session_timeout", SESSION_TIMEOUTS)
            .map_err(|err| refuse(err.message().to_owned()))?
            .unwrap_or(DEFAULT_SESSION_TIMEOUT);
        if let Some(ca) = params.text("tls_ca") {
            if !tls {
                return Err(refuse("tls_ca is for zks:// (TLS)".into()));
            }
            tls_ca = Some(std::path::PathBuf::from(ca));
        }
        params
            .finish()
            .map_err(|err| refuse(err.message().to_owned()))?;
        if tls && tls_ca.is_none() {
            return Err(refuse(
                "zks:// needs tls_ca, the PEM file of the servers' certificate authority".into(),
            ));
        }
        let base = distlock_core::backend::url_path(url).map_err(|why| refuse(why.into()))?;
        let base = match base.trim_end_matches('/') {
            "" => DEFAULT_BASE.to_owned(),
            path => path.to_owned(),
        };
        if let Some(bad) = base
            .split('/')
            .skip(1)
            .find(|s| !crate::names::storable_segment(s))
        {
            return Err(refuse(format!(
                "the base path has the segment `{bad}`, which ZooKeeper cannot store"
            )));
        }
        if base == "/zookeeper" || base.starts_with("/zookeeper/") {
            return Err(refuse(
                "the base path is under /zookeeper, which the server keeps for itself and clients cannot store locks in".into(),
            ));
        }
        let digest = distlock_core::backend::url_credentials(url)
            .map_err(|why| refuse(why.into()))?
            .map(|(user, password)| format!("{user}:{password}"));
        Ok(ZkConfig {
            hosts,
            base,
            session_timeout,
            digest,
            tls_ca,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<ZkConfig> {
        ZkConfig::from_url(&distlock_core::parse_lock_url(url)?)
    }

    #[test]
    fn a_password_with_url_characters_never_shows() {
        for password in ["p@ss", "a:b", "x%2Fy", "q%40r"] {
            let url = format!("zk://user:{password}@127.0.0.1:1/base?bogus=1");
            let err = parse(&url).unwrap_err().to_string();
            let decoded = percent_encoding::percent_decode_str(password)
                .decode_utf8()
                .unwrap();
            assert!(!err.contains(password) && !err.contains(&*decoded), "{err}");
            let config = parse(&format!("zk://user:{password}@127.0.0.1:1/base")).unwrap();
            assert_eq!(config.digest.as_deref(), Some(&*format!("user:{decoded}")));
            assert!(!format!("{config:?}").contains(&*decoded));
        }
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("zk:///base", "needs a host"),
            ("zk://h:1/a?session_timeout=0s", "session_timeout"),
            ("zk://h:1/a?session_timeout=2h", "session_timeout"),
            ("zk://h:1/a?session_timeout=soon", "session_timeout"),
            ("zk://h:1/a?prefix=x", "unknown parameter"),
            ("zks://h:1/a", "needs tls_ca"),
            ("zk://h:1/a?tls_ca=ca.pem", "is for zks://"),
            ("zkx://h:1/a", "neither zk nor zks"),
            ("zk://h:1/a/%01b", "cannot store"),
            ("zk://h:1/zookeeper/x", "cannot store"),
        ] {
            let err = parse(url).unwrap_err();
            assert_eq!(err.kind(), distlock_core::ErrorKind::InvalidInput);
            assert!(err.to_string().contains(why), "{url}: {err}");
        }
    }

    #[test]
    fn a_base_path_keeps_its_segments() {
        assert_eq!(parse("zk://h:1/").unwrap().base, DEFAULT_BASE);
        assert_eq!(parse("zk://h:1/a/b/").unwrap().base, "/a/b");
        assert_eq!(parse("zk://a:1,b:2,c:3/x").unwrap().hosts, "a:1,b:2,c:3");
        assert_eq!(parse("zk://a/x").unwrap().hosts, "a:2181");
    }
}
