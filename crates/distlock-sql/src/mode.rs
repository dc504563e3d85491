//! How locks are held on a server database (PostgreSQL, MySQL/MariaDB), chosen by the
//! URL's `mode` parameter, how many pooled connections a client keeps (`pool`), and how
//! long a connection may take (`connect_timeout`).

use std::time::Duration;

use distlock_core::backend::duration_within;
use distlock_core::{Error, Result, Url};

/// How locks are held on a server database.
///
/// # Examples
///
/// ```
/// use distlock_sql::Mode;
/// assert_eq!(Mode::parse("lease").unwrap(), Mode::Lease);
/// assert!(Mode::parse("bogus").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Locks of the server's own, each held by a connection of its own (the default).
    Session,
    /// Rows in the shared lease table with TTLs from the database's clock; safe behind a
    /// transaction-pooling proxy.
    Lease,
}

impl Mode {
    /// Parses `session` or `lease`.
    ///
    /// # Examples
    ///
    /// See [`Mode`].
    pub fn parse(text: &str) -> Result<Mode> {
        match text {
            "session" => Ok(Mode::Session),
            "lease" => Ok(Mode::Lease),
            other => Err(Error::invalid(format!(
                "unknown lock mode `{other}`: use mode=session or mode=lease"
            ))),
        }
    }

    /// The URL's mode (session if it names none) and the URL without distlock's own
    /// parameters, for the driver (every other parameter passes through).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_sql::Mode;
    /// let url = distlock_core::Url::parse("mysql://db/app?mode=lease&ssl-mode=required").unwrap();
    /// let (mode, driver) = Mode::split(&url)?;
    /// assert_eq!(mode, Mode::Lease);
    /// assert_eq!(driver.as_str(), "mysql://db/app?ssl-mode=required");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn split(url: &Url) -> Result<(Mode, Url)> {
        let mode = match url.query_pairs().find(|(key, _)| key == "mode") {
            Some((_, value)) => Mode::parse(&value)?,
            None => Mode::Session,
        };
        let passed: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(key, _)| !OWN_PARAMETERS.contains(&key.as_ref()))
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let mut driver = url.clone();
        driver.set_query(None);
        if !passed.is_empty() {
            driver.query_pairs_mut().extend_pairs(passed);
        }
        Ok((mode, driver))
    }
}

/// How many pooled connections a client keeps at most when the URL says none.
pub const DEFAULT_POOL: u32 = 16;

/// The URL's `pool` parameter: the most pooled connections a client keeps for its
/// statements (default [`DEFAULT_POOL`], between 1 and 1,024). Session-mode locks, and
/// PostgreSQL's wake-up listener, hold connections of their own besides these.
///
/// # Examples
///
/// ```
/// use distlock_sql::pool_size;
/// let url = |q: &str| distlock_core::Url::parse(&format!("postgres://db/app{q}")).unwrap();
/// assert_eq!(pool_size(&url(""))?, 16);
/// assert_eq!(pool_size(&url("?pool=4"))?, 4);
/// assert!(pool_size(&url("?pool=0")).is_err());
/// assert!(pool_size(&url("?pool=many")).is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn pool_size(url: &Url) -> Result<u32> {
    match url.query_pairs().find(|(key, _)| key == "pool") {
        None => Ok(DEFAULT_POOL),
        Some((_, value)) => value
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "pool `{value}` is not a number of connections between 1 and 1024"
                ))
            }),
    }
}

/// How long the first connection may take when the URL says nothing.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The URL's `connect_timeout` parameter: how long a connection to the server may take
/// (default [`DEFAULT_CONNECT_TIMEOUT`], between 10 ms and an hour). A server that refuses
/// the connection fails at once, whatever it is.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_sql::connect_timeout;
/// let url = |q: &str| distlock_core::Url::parse(&format!("postgres://db/app{q}")).unwrap();
/// assert_eq!(connect_timeout(&url(""))?, Duration::from_secs(5));
/// assert_eq!(connect_timeout(&url("?connect_timeout=500ms"))?, Duration::from_millis(500));
/// assert!(connect_timeout(&url("?connect_timeout=0s")).is_err());
/// assert!(connect_timeout(&url("?connect_timeout=soon")).is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn connect_timeout(url: &Url) -> Result<Duration> {
    match url.query_pairs().find(|(key, _)| key == "connect_timeout") {
        None => Ok(DEFAULT_CONNECT_TIMEOUT),
        Some((_, value)) => duration_within(
            "connect_timeout",
            &value,
            Duration::from_millis(10)..=Duration::from_secs(3600),
        ),
    }
}

/// distlock's own parameters of a server database URL.
const OWN_PARAMETERS: [&str; 4] = ["mode", "pool", "connect_timeout", "fence_ttl"];

/// Refuses a query parameter that is neither distlock's nor one the driver reads (`driver`),
/// so a typo is an error naming the valid ones, not an option silently dropped.
pub(crate) fn check_parameters(url: &Url, backend: &str, driver: &[&str]) -> Result<()> {
    for (key, _) in url.query_pairs() {
        // A list of hosts, which the URL parser moves into `hosts`.
        if key == "hosts" {
            return Err(Error::invalid(format!(
                "a {backend} URL names one server; several hosts are for redis+cluster://, redlock://, zk:// and etcd://"
            )));
        }
        // PostgreSQL's `options[search_path]=app` form of `options`.
        let option = key.starts_with("options[") && driver.contains(&"options");
        if !option && !OWN_PARAMETERS.contains(&key.as_ref()) && !driver.contains(&key.as_ref()) {
            return Err(Error::invalid(format!(
                "unknown parameter `{key}` in a {backend} URL; known: {}, and the driver's {}",
                OWN_PARAMETERS.join(", "),
                driver.join(", ")
            )));
        }
    }
    Ok(())
}

/// Refuses a parameter among `keys` (the driver's certificate and key files) that names a
/// file this process cannot read, by name and at once, instead of a bare "No such file or
/// directory" from the first connection. A value that is itself PEM text, which the driver
/// also takes, is left to it.
pub(crate) fn check_files(url: &Url, keys: &[&str]) -> Result<()> {
    for (key, value) in url.query_pairs() {
        if !keys.contains(&key.as_ref()) || value.starts_with("-----BEGIN") {
            continue;
        }
        let unreadable = |why: &dyn std::fmt::Display| {
            Error::invalid(format!("{key} `{value}` cannot be read: {why}"))
        };
        // Asked before opening, which would wait on a FIFO.
        let meta = std::fs::metadata(value.as_ref()).map_err(|e| unreadable(&e))?;
        if !meta.is_file() {
            return Err(unreadable(&"it is not a file"));
        }
        std::fs::File::open(value.as_ref()).map_err(|e| unreadable(&e))?;
    }
    Ok(())
}
