//! `postgres://` URLs: the server and credentials (passed to the driver as they are) and
//! distlock's own parameter `mode`.

use std::str::FromStr;

use distlock_core::{Error, Result, Url, redact_url};

pub use crate::Mode;
use crate::ServerParams;
use sqlx::postgres::PgConnectOptions;

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
///
/// // The driver's own parameters pass, its `options[…]` form included...
/// let ok = "postgres://app@127.0.0.1/app?sslmode=disable&options[search_path]=app";
/// assert!(PostgresConfig::from_url(&distlock_core::Url::parse(ok).unwrap()).is_ok());
/// // ...but a parameter neither distlock nor the driver reads is refused, not dropped.
/// let typo = distlock_core::Url::parse("postgres://app:s3cret@127.0.0.1:5432/app?min_pool=1").unwrap();
/// let err = PostgresConfig::from_url(&typo).unwrap_err();
/// assert!(err.to_string().contains("unknown parameter `min_pool`"), "{err}");
/// assert!(!err.to_string().contains("s3cret"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct PostgresConfig {
    /// How locks are held.
    pub mode: Mode,
    /// The most pooled connections the client keeps (`?pool=`; session-mode locks hold
    /// connections of their own besides these).
    pub pool: u32,
    /// How long a connection to the server may take (`?connect_timeout=`, default 5 s).
    pub connect_timeout: std::time::Duration,
    /// How long a name's fencing counter is kept after its last grant (`?fence_ttl=`,
    /// default a day): each client deletes older ones, as it connects and then hourly.
    pub fence_ttl: std::time::Duration,
    /// The driver's connection options (credentials included).
    pub options: PgConnectOptions,
    /// The URL with its password replaced, for messages.
    pub redacted: String,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("mode", &self.mode)
            .field("pool", &self.pool)
            .field("url", &self.redacted)
            .finish()
    }
}

/// The query parameters sqlx's PostgreSQL driver reads.
const DRIVER_PARAMETERS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The driver's parameters that name a certificate or key file.
const FILE_PARAMETERS: [&str; 7] = [
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
];

impl PostgresConfig {
    /// Parses a `postgres://` or `postgresql://` URL.
    ///
    /// # Examples
    ///
    /// See [`PostgresConfig`].
    pub fn from_url(url: &Url) -> Result<Self> {
        let redacted = redact_url(url.as_str());
        let params = ServerParams::of(url, "postgres", &DRIVER_PARAMETERS, &FILE_PARAMETERS)?;
        let driver_url = &params.driver_url;
        let options = PgConnectOptions::from_str(driver_url.as_str()).map_err(|err| {
            Error::invalid(format!("not a usable PostgreSQL URL ({redacted}): {err}"))
        })?;
        Ok(PostgresConfig {
            mode: params.mode,
            pool: params.pool,
            connect_timeout: params.connect_timeout,
            fence_ttl: params.fence_ttl,
            options,
            redacted,
        })
    }
}
