//! `redlock://` URLs: the masters, and the per-master timeout.

use std::time::Duration;

use distlock_core::backend::UrlParams;
use distlock_core::{Error, Result, Url};

use crate::redis::config::RedisConfig;

/// The shortest `fence_ttl` of a RedLock's masters.
pub(crate) const MIN_REDLOCK_FENCE_TTL: Duration = Duration::from_secs(60);

/// How to reach the independent masters of a RedLock, parsed from
/// `redlock://[user:password@]h1:6379,h2:6379,h3:6379[/db]`, or `redlocks://` for TLS to
/// every master (with `tls_ca` as for `rediss://`); the core passes the host list in the
/// query parameter `hosts`. `node_timeout` (e.g. `50ms`) bounds each master's
/// answer; by default it is a twentieth of the lock's TTL, between 5 ms and 200 ms. Other
/// query parameters (`prefix`, the Redis client's) apply to every master.
///
/// # Examples
///
/// ```
/// use distlock_redis::RedlockConfig;
/// let url = distlock_core::parse_lock_url("redlock://:pw@a:1,b:2,c:3/0?node_timeout=20ms")?;
/// let config = RedlockConfig::from_url(&url)?;
/// assert_eq!(config.masters.len(), 3);
/// assert_eq!(config.quorum(), 2);
/// assert!(!format!("{config:?}").contains("pw"));
///
/// let twice = distlock_core::parse_lock_url("redlock://a:1,b:2,A:1")?;
/// let err = RedlockConfig::from_url(&twice).unwrap_err();
/// assert!(err.to_string().contains("`A:1` twice"), "{err}");
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RedlockConfig {
    /// One Redis configuration per master, in the order given.
    pub masters: Vec<RedisConfig>,
    /// The bound on each master's answer, if set in the URL.
    pub node_timeout: Option<Duration>,
}

impl RedlockConfig {
    /// Parses a `redlock://` URL (after [`distlock_core::parse_lock_url`]).
    ///
    /// # Examples
    ///
    /// See [`RedlockConfig`].
    pub fn from_url(url: &Url) -> Result<Self> {
        let mut params = UrlParams::of(url)?;
        let hosts = params.text("hosts");
        let node_timeout = match params.text("node_timeout") {
            None => None,
            Some(value) => {
                let timeout = humantime::parse_duration(&value).map_err(|e| {
                    Error::invalid(format!("node_timeout `{value}` is not a duration: {e}"))
                })?;
                if timeout.is_zero() {
                    return Err(Error::invalid("node_timeout must be more than zero"));
                }
                Some(timeout)
            }
        };
        if url.query_pairs().any(|(key, _)| key == "first_try") {
            return Err(Error::invalid(
                "first_try is for one Redis server or a cluster: a RedLock master's tokens follow the clock, which takes a script",
            ));
        }
        // Every other parameter is each master's, which its own parse checks.
        let passed = params.into_rest();
        let hosts = match hosts {
            Some(list) => list.split(',').map(str::to_owned).collect(),
            None => vec![format!(
                "{}:{}",
                url.host_str().unwrap_or_default(),
                url.port().unwrap_or(6379)
            )],
        };
        let scheme = match url.scheme() {
            "redlocks" => "rediss",
            _ => "redis",
        };
        let masters = hosts
            .iter()
            .map(|host| {
                master_url(scheme, url, host, &passed).and_then(|u| RedisConfig::from_url(&u))
            })
            .collect::<Result<Vec<_>>>()?;
        // The same master twice would count one server's answer twice toward the quorum.
        let mut seen = std::collections::HashSet::new();
        for (host, master) in hosts.iter().zip(&masters) {
            let server = &master.server;
            let place = (
                server.host_str().map(str::to_ascii_lowercase),
                server.port(),
            );
            if !seen.insert(place) {
                return Err(Error::invalid(format!(
                    "a RedLock lists the master `{host}` twice; its masters must be independent servers"
                )));
            }
        }
        // Each master seeds its counters from its own clock: a counter seeded again must be
        // far older than any difference between the masters' clocks.
        if masters.iter().any(|m| m.fence_ttl < MIN_REDLOCK_FENCE_TTL) {
            return Err(Error::invalid(format!(
                "a RedLock's fence_ttl must be at least {MIN_REDLOCK_FENCE_TTL:?}: its masters' clocks may differ"
            )));
        }
        if masters.len() < 3 || masters.len() % 2 == 0 {
            return Err(Error::invalid(format!(
                "a RedLock needs an odd number of independent masters, at least 3 (got {}: {})",
                masters.len(),
                hosts.join(", ")
            )));
        }
        Ok(RedlockConfig {
            masters,
            node_timeout,
        })
    }

    /// How many masters must agree: a majority.
    ///
    /// # Examples
    ///
    /// See [`RedlockConfig`].
    pub fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }
}

/// The `scheme://` URL of one master: the RedLock URL's credentials, database and options,
/// with `host` (`name:port`).
fn master_url(scheme: &str, url: &Url, host: &str, passed: &[(String, String)]) -> Result<Url> {
    let bad = || Error::invalid(format!("bad RedLock master `{host}`: expected host:port"));
    let (name, port) = host.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let mut master = Url::parse(&format!("{scheme}://{name}:{port}")).map_err(|_| bad())?;
    if !url.username().is_empty() {
        master.set_username(url.username()).map_err(|_| bad())?;
    }
    if url.password().is_some() {
        master.set_password(url.password()).map_err(|_| bad())?;
    }
    master.set_path(url.path());
    if !passed.is_empty() {
        master.query_pairs_mut().extend_pairs(passed);
    }
    Ok(master)
}
