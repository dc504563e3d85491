//! How locks are held on a server database (PostgreSQL, MySQL/MariaDB), chosen by the
//! URL's `mode` parameter, how many pooled connections a client keeps (`pool`), and how
//! long a connection may take (`connect_timeout`).

use std::time::Duration;

use distlock_core::backend::{UrlParams, fence_ttl};
use distlock_core::{Error, Result, Url};

use crate::fences::SWEEP_TABLE;

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
        let mut params = UrlParams::of(url)?;
        let mode = params
            .text("mode")
            .as_deref()
            .map_or(Ok(Mode::Session), Mode::parse)?;
        for own in OWN_PARAMETERS {
            params.text(own);
        }
        Ok((mode, driver_url(url, params.into_rest())))
    }
}

/// How many pooled connections a client keeps at most when the URL says none.
pub const DEFAULT_POOL: u32 = 16;

/// How long the first connection may take when the URL says nothing.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// distlock's own parameters of a server database URL.
const OWN_PARAMETERS: [&str; 4] = ["mode", "pool", "connect_timeout", "fence_ttl"];

/// What a server database URL asks of distlock, and the URL the driver gets (without
/// distlock's own parameters).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_sql::{Mode, ServerParams};
/// let url = |q: &str| distlock_core::Url::parse(&format!("postgres://db/app{q}")).unwrap();
/// let read = |q: &str| ServerParams::of(&url(q), "postgres", &["sslmode"], &[]);
/// let params = read("?pool=4&connect_timeout=500ms&sslmode=require")?;
/// assert_eq!((params.mode, params.pool), (Mode::Session, 4));
/// assert_eq!(params.connect_timeout, Duration::from_millis(500));
/// assert_eq!(params.driver_url.as_str(), "postgres://db/app?sslmode=require");
/// assert_eq!(read("")?.pool, distlock_sql::DEFAULT_POOL);
/// assert!(read("?pool=0").is_err() && read("?connect_timeout=soon").is_err());
/// assert!(read("?sslmod=require").unwrap_err().message().contains("unknown parameter `sslmod`"));
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerParams {
    /// How locks are held (`mode`, session by default).
    pub mode: Mode,
    /// The most pooled connections a client keeps for its statements (`pool`, between 1
    /// and 1,024, [`DEFAULT_POOL`] by default). Session-mode locks, and PostgreSQL's
    /// wake-up listener, hold connections of their own besides these.
    pub pool: u32,
    /// How long a connection to the server may take (`connect_timeout`, between 10 ms and
    /// an hour, [`DEFAULT_CONNECT_TIMEOUT`] by default). A server that refuses the
    /// connection fails at once, whatever it is.
    pub connect_timeout: Duration,
    /// How long an idle name's fencing counter is kept (`fence_ttl`).
    pub fence_ttl: Duration,
    /// The URL for the driver: the same, without distlock's parameters.
    pub driver_url: Url,
}

impl ServerParams {
    /// Reads the parameters of a `backend` URL (`postgres`, `mysql`) whose driver reads the
    /// parameters `driver` and, among them, the files `files`. A parameter that is neither
    /// distlock's nor the driver's is refused, so a typo is an error naming the valid ones,
    /// not an option silently dropped; so is a file parameter naming a file this process
    /// cannot read, at once, instead of a bare "No such file or directory" from the first
    /// connection.
    ///
    /// # Examples
    ///
    /// See [`ServerParams`].
    pub fn of(url: &Url, backend: &str, driver: &[&str], files: &[&str]) -> Result<ServerParams> {
        let mut params = UrlParams::of(url)?;
        if params.text("hosts").is_some() {
            // A list of hosts, which the URL parser moves into `hosts`.
            return Err(Error::invalid(format!(
                "a {backend} URL names one server; several hosts are for redis+cluster://, redlock://, zk:// and etcd://"
            )));
        }
        let mode = params
            .text("mode")
            .as_deref()
            .map_or(Ok(Mode::Session), Mode::parse)?;
        let pool = params.number("pool", 1..=1024)?.unwrap_or(DEFAULT_POOL);
        let connect_timeout = params
            .duration(
                "connect_timeout",
                Duration::from_millis(10)..=Duration::from_secs(3600),
            )?
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let fence_ttl = fence_ttl(&mut params)?;
        let passed = params.into_rest();
        for (key, value) in &passed {
            // PostgreSQL's `options[search_path]=app` form of `options`.
            let option = key.starts_with("options[") && driver.contains(&"options");
            if !option && !driver.contains(&key.as_str()) {
                return Err(Error::invalid(format!(
                    "unknown parameter `{key}` in a {backend} URL; known: {}, and the driver's {}",
                    OWN_PARAMETERS.join(", "),
                    driver.join(", ")
                )));
            }
            if files.contains(&key.as_str()) {
                check_file(key, value)?;
            }
        }
        Ok(ServerParams {
            mode,
            pool,
            connect_timeout,
            fence_ttl,
            driver_url: driver_url(url, passed),
        })
    }
}

/// `url` with `passed` as its only query parameters.
fn driver_url(url: &Url, passed: Vec<(String, String)>) -> Url {
    let mut driver = url.clone();
    driver.set_query(None);
    if !passed.is_empty() {
        driver.query_pairs_mut().extend_pairs(passed);
    }
    driver
}

/// Refuses the file parameter `key` naming a file this process cannot read. A value that is
/// itself PEM text, which the driver also takes, is left to it.
fn check_file(key: &str, value: &str) -> Result<()> {
    if value.starts_with("-----BEGIN") {
        return Ok(());
    }
    let unreadable = |why: &dyn std::fmt::Display| {
        Error::invalid(format!("{key} `{value}` cannot be read: {why}"))
    };
    // Asked before opening, which would wait on a FIFO.
    let meta = std::fs::metadata(value).map_err(|e| unreadable(&e))?;
    if !meta.is_file() {
        return Err(unreadable(&"it is not a file"));
    }
    std::fs::File::open(value).map_err(|e| unreadable(&e))?;
    Ok(())
}

/// Logs that the sweep table could not be made (see [`SWEEP_TABLE`]), on the server dialects, which make it apart from their other tables.
pub(crate) fn sweep_table_refused(backend: &'static str, err: &sqlx::Error) {
    tracing::warn!(
        backend,
        error = %err,
        "cannot make the distlock_sweep table, so every client sweeps idle fencing counters by itself; someone allowed to can run: {}",
        SWEEP_TABLE.join("; ")
    );
}

/// Logs that the note table could not be made by `statement`, on the server dialects,
/// which make it apart from their other tables: job run records fail until it exists.
pub(crate) fn note_table_refused(backend: &'static str, statement: &str, err: &sqlx::Error) {
    tracing::warn!(
        backend,
        error = %err,
        "cannot make the distlock_note table, so jobs keep no run records (once_per and job_status fail); someone allowed to can run: {statement}"
    );
}
