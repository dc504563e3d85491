//! `mysql://` and `mariadb://` URLs: the server and credentials (passed to the driver as
//! they are) and distlock's own parameter `mode`.

use std::str::FromStr;

use distlock_core::{Error, Result, Url, redact_url};
use sqlx::mysql::MySqlConnectOptions;

pub use crate::Mode;
use crate::ServerParams;

/// How to reach a MySQL or MariaDB lock database, parsed from its URL.
///
/// `mysql://user:password@host:port/database?mode=lease`, with the driver's own
/// parameters (`ssl-mode`, `ssl-ca`, `charset`, …) passed through.
///
/// # Examples
///
/// ```
/// use distlock_sql::mysql::{Mode, MysqlConfig};
/// let url = distlock_core::Url::parse("mysql://app:s3cret@127.0.0.1:3306/app?mode=lease").unwrap();
/// let config = MysqlConfig::from_url(&url)?;
/// assert_eq!(config.mode, Mode::Lease);
/// assert!(!format!("{config:?}").contains("s3cret"));
///
/// // A parameter neither distlock nor the driver reads is refused, not dropped.
/// let typo = distlock_core::Url::parse("mysql://app:s3cret@127.0.0.1:3306/app?ssl_mode=REQUIRED").unwrap();
/// let err = MysqlConfig::from_url(&typo).unwrap_err();
/// assert!(err.to_string().contains("unknown parameter `ssl_mode`"), "{err}");
/// assert!(!err.to_string().contains("s3cret"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct MysqlConfig {
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
    pub options: MySqlConnectOptions,
    /// The URL with its password replaced, for messages.
    pub redacted: String,
}

impl std::fmt::Debug for MysqlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlConfig")
            .field("mode", &self.mode)
            .field("pool", &self.pool)
            .field("url", &self.redacted)
            .finish()
    }
}

/// The query parameters sqlx's MySQL driver reads.
const DRIVER_PARAMETERS: [&str; 14] = [
    "sslmode",
    "ssl-mode",
    "sslca",
    "ssl-ca",
    "charset",
    "collation",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "socket",
    "timezone",
    "time-zone",
];

/// The driver's parameters that name a certificate or key file.
const FILE_PARAMETERS: [&str; 6] = [
    "sslca", "ssl-ca", "sslcert", "ssl-cert", "sslkey", "ssl-key",
];

impl MysqlConfig {
    /// Parses a `mysql://` or `mariadb://` URL.
    ///
    /// # Examples
    ///
    /// See [`MysqlConfig`].
    pub fn from_url(url: &Url) -> Result<Self> {
        let redacted = redact_url(url.as_str());
        let params = ServerParams::of(url, "mysql", &DRIVER_PARAMETERS, &FILE_PARAMETERS)?;
        let mut driver_url = params.driver_url.clone();
        if driver_url.scheme() == "mariadb" {
            driver_url = Url::parse(&driver_url.as_str().replacen("mariadb", "mysql", 1)).map_err(
                |err| Error::invalid(format!("not a usable MySQL URL ({redacted}): {err}")),
            )?;
        }
        let options = MySqlConnectOptions::from_str(driver_url.as_str())
            .map_err(|err| Error::invalid(format!("not a usable MySQL URL ({redacted}): {err}")))?;
        // MySQL has no default database, and the lock tables must live in one.
        if options.get_database().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "a MySQL URL names the database the lock tables live in \
                 (mysql://user:password@host:3306/locks); {redacted} names none"
            )));
        }
        Ok(MysqlConfig {
            mode: params.mode,
            pool: params.pool,
            connect_timeout: params.connect_timeout,
            fence_ttl: params.fence_ttl,
            options,
            redacted,
        })
    }
}
