//! `sqlite://` URLs: where the database file is and how to open it.

use std::path::PathBuf;
use std::time::Duration;

use distlock_core::backend::{UrlParams, fence_ttl};
use distlock_core::{Error, Result, Url};

/// The longest `busy_timeout`: how long one statement may wait for another process's
/// write (a lock request waits longer by asking again, within its own deadline).
const MAX_BUSY_TIMEOUT: Duration = Duration::from_secs(3600);

/// How to open a SQLite lock database, parsed from its URL.
///
/// `sqlite:///abs/path/locks.db` (absolute) or `sqlite://relative/locks.db`, with optional
/// query parameters `busy_timeout` (a duration up to `1h`, default `5s`), `synchronous`
/// (`full`, the default, or `normal`: faster, but a power loss may roll back the last
/// grants; fencing tokens still only increase, as they never fall below the clock in
/// microseconds) and `fence_ttl` (how long a name's fencing counter is kept after its last
/// grant, default a day).
///
/// # Examples
///
/// ```
/// use distlock_sql::sqlite::SqliteConfig;
/// let url = distlock_core::Url::parse("sqlite:///var/lib/app/locks.db?busy_timeout=2s").unwrap();
/// let config = SqliteConfig::from_url(&url)?;
/// assert_eq!(config.path.to_str(), Some("/var/lib/app/locks.db"));
/// assert_eq!(config.busy_timeout.as_secs(), 2);
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    /// The database file (created if missing; its directory must exist).
    pub path: PathBuf,
    /// How long a statement waits for another process's write transaction.
    pub busy_timeout: Duration,
    /// Whether every commit is flushed to disk before it returns.
    pub full_sync: bool,
    /// How long a name's fencing counter is kept after its last grant (`fence_ttl`,
    /// default a day): each client deletes older ones, as it opens the database and then
    /// hourly.
    pub fence_ttl: Duration,
}

impl SqliteConfig {
    /// Parses a `sqlite://` URL.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_sql::sqlite::SqliteConfig;
    /// let url = distlock_core::Url::parse("sqlite://locks.db?bogus=1").unwrap();
    /// assert!(SqliteConfig::from_url(&url).is_err());
    /// ```
    pub fn from_url(url: &Url) -> Result<Self> {
        let path = match url.host_str() {
            Some(host) if !host.is_empty() => {
                PathBuf::from(format!("{host}{}", decoded_path(url)?))
            }
            _ => PathBuf::from(decoded_path(url)?),
        };
        if path.as_os_str().is_empty() || path.to_str().is_some_and(|p| p.contains(":memory:")) {
            return Err(Error::invalid(
                "sqlite URLs name a database file, e.g. sqlite:///var/lib/app/locks.db; for locks inside one process use memory://",
            ));
        }
        let mut config = SqliteConfig {
            path,
            busy_timeout: Duration::from_secs(5),
            full_sync: true,
            fence_ttl: distlock_core::backend::DEFAULT_FENCE_TTL,
        };
        let mut params = UrlParams::of(url)?;
        if let Some(timeout) = params.duration("busy_timeout", Duration::ZERO..=MAX_BUSY_TIMEOUT)? {
            config.busy_timeout = timeout;
        }
        config.full_sync = match params.text("synchronous").as_deref() {
            None | Some("full") => true,
            Some("normal") => false,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "synchronous must be `full` or `normal`, not `{other}`"
                )));
            }
        };
        config.fence_ttl = fence_ttl(&mut params)?;
        params.finish()?;
        Ok(config)
    }
}

fn decoded_path(url: &Url) -> Result<String> {
    percent_encoding::percent_decode_str(url.path())
        .decode_utf8()
        .map(|p| p.into_owned())
        .map_err(|_| Error::invalid("the sqlite path is not valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<SqliteConfig> {
        SqliteConfig::from_url(&Url::parse(url).unwrap())
    }

    #[test]
    fn relative_absolute_and_escaped_paths() {
        assert_eq!(
            parse("sqlite://locks.db").unwrap().path,
            PathBuf::from("locks.db")
        );
        assert_eq!(
            parse("sqlite://./a/b.db").unwrap().path,
            PathBuf::from("./a/b.db")
        );
        assert_eq!(
            parse("sqlite:///tmp/my%20locks.db").unwrap().path,
            PathBuf::from("/tmp/my locks.db")
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = parse("sqlite:///x.db?synchronous=sometimes").unwrap_err();
        assert!(err.message().contains("sometimes"));
        assert!(parse("sqlite:///x.db?busy_timeout=soon").is_err());
        // SQLite counts it in milliseconds in an `int`: 25 days would not fit.
        let err = parse("sqlite:///x.db?busy_timeout=25days").unwrap_err();
        assert!(err.message().contains("from 0s to 1h"), "{err}");
        assert_eq!(
            parse("sqlite:///x.db?busy_timeout=0s")
                .unwrap()
                .busy_timeout,
            Duration::ZERO
        );
        assert!(parse("sqlite::memory:").is_err());
    }
}
