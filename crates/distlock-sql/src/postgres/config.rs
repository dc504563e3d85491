//! `postgres://` URLs: the server and credentials (passed to the driver as they are) and
//! distlock's own parameter `mode`.

use std::str::FromStr;

use distlock_core::{Error, Result, Url, redact_url};
use sqlx::postgres::PgConnectOptions;

/// How locks are held on PostgreSQL.
///
/// # Examples
///
/// ```
/// use distlock_sql::postgres::Mode;
/// assert_eq!(Mode::parse("lease").unwrap(), Mode::Lease);
/// assert!(Mode::parse("bogus").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Advisory locks, each held by a connection of its own (the default).
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
                "unknown PostgreSQL lock mode `{other}`: use mode=session or mode=lease"
            ))),
        }
    }
}

/// How to reach a PostgreSQL lock database, parsed from its URL.
///
/// `postgres://user:password@host:port/database?mode=lease`, with the driver's own
/// parameters (`sslmode`, `sslrootcert`, `application_name`, …) passed through.
///
/// # Examples
///
/// ```
/// use distlock_sql::postgres::{Mode, PostgresConfig};
/// let url = distlock_core::Url::parse("postgres://app:s3cret@127.0.0.1:5432/app?mode=lease&sslmode=prefer").unwrap();
/// let config = PostgresConfig::from_url(&url)?;
/// assert_eq!(config.mode, Mode::Lease);
/// assert!(!format!("{config:?}").contains("s3cret"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct PostgresConfig {
    /// How locks are held.
    pub mode: Mode,
    /// The driver's connection options (credentials included).
    pub options: PgConnectOptions,
    /// The URL with its password replaced, for messages.
    pub redacted: String,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("mode", &self.mode)
            .field("url", &self.redacted)
            .finish()
    }
}

impl PostgresConfig {
    /// Parses a `postgres://` or `postgresql://` URL.
    ///
    /// # Examples
    ///
    /// See [`PostgresConfig`].
    pub fn from_url(url: &Url) -> Result<Self> {
        let redacted = redact_url(url.as_str());
        let mut mode = Mode::Session;
        let mut driver_url = url.clone();
        let passed: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(key, _)| key != "mode")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if let Some((_, value)) = url.query_pairs().find(|(key, _)| key == "mode") {
            mode = Mode::parse(&value)?;
        }
        driver_url.set_query(None);
        if !passed.is_empty() {
            driver_url.query_pairs_mut().extend_pairs(passed);
        }
        let options = PgConnectOptions::from_str(driver_url.as_str()).map_err(|err| {
            Error::invalid(format!("not a usable PostgreSQL URL ({redacted}): {err}"))
        })?;
        Ok(PostgresConfig {
            mode,
            options,
            redacted,
        })
    }
}
