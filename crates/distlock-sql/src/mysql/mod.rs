//! The MySQL and MariaDB backend (`mysql://`, `mariadb://`).
//!
//! # Modes
//!
//! * **Session mode** (the default): a mutex is `GET_LOCK` held by a connection of its own,
//!   which goes back to a small idle set only after a clean `RELEASE_LOCK` (a connection
//!   in doubt is closed, which makes the server release its lock). A name is locked under
//!   [`lock_key`]: the name itself when it has at most 64 characters (MySQL's limit), so
//!   other programs calling `GET_LOCK('orders', …)` exclude distlock's `orders` too.
//!   Acquiring takes one statement (lock, fencing token, holder record) and releasing one.
//!   Waiters wait in the server's own queue with a blocking `GET_LOCK`, stopped with
//!   `KILL QUERY` when cancelled. The session's `wait_timeout` is the lease's TTL rounded
//!   up to whole seconds, and each renewal is a query on the lock's connection that checks
//!   the lock is still its own: a holder that stops renewing (paused, cut off) has its
//!   connection closed by the server once the TTL has passed, and a renewal that finds the
//!   connection dead or the lock gone makes the guard `Lost` at once. Read/write locks and
//!   semaphores, which `GET_LOCK` has no form of, are leases as in lease mode. Fencing
//!   tokens come from an in-memory counter per key (no disk flush per acquire) that never
//!   falls below the database's clock in microseconds, so they keep increasing across
//!   server restarts. Not safe behind a proxy that shares server connections between
//!   clients (ProxySQL with multiplexing, for one).
//! * **Lease mode** (`?mode=lease`): grants are rows of the shared lease table (the same
//!   design as SQLite's and PostgreSQL's), with TTLs from the database's clock, changed
//!   in transactions that lock the name's fencing-counter row (`SELECT … FOR UPDATE`
//!   semantics through an upsert), so nothing outlives a transaction. Mutex, RwLock,
//!   Semaphore, fair mode, durable fencing tokens. MySQL has no notifications: waiters of
//!   clients in the same process are woken at once, others poll no later than the first
//!   grant's expiry and at least every second.
//!
//! All clients of one name must use the same mode. `information_schema.PROCESSLIST` shows
//! other users' waiters only with the `PROCESS` privilege; without it `status` lists the
//! session-mode waiters of the connecting user only.
//!
//! Driver parameters (`ssl-mode`, `ssl-ca`, `charset`, …) pass through the URL. Passwords
//! never appear in `Debug` output, logs or errors.
//!
//! # Examples
//!
//! ```no_run
//! # async fn f() -> distlock_core::Result<()> {
//! distlock_sql::install();
//! let client = distlock_core::Client::connect("mysql://app:pw@127.0.0.1/app").await?;
//! let guard = client.mutex("nightly-report").lock().await?;
//! # Ok(()) }
//! ```

mod backend;
mod config;
mod notes;
mod schema;
mod session;
mod store;
mod upkeep;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Error, Result, Url};
use sha2::{Digest, Sha256};

pub use backend::MysqlBackend;
pub use config::{Mode, MysqlConfig};

/// The longest name `GET_LOCK` takes, in characters (MySQL's limit; MariaDB's is larger).
pub const MAX_KEY_CHARS: usize = 64;

/// The key a lock name is locked under: the name itself if it has at most
/// [`MAX_KEY_CHARS`] characters, otherwise `distlock:` followed by the first 55 hex digits
/// of the SHA-256 digest of the name's UTF-8 bytes (64 characters in all). Keys compare
/// byte for byte.
///
/// In SQL: `IF(CHAR_LENGTH(name) <= 64, name, CONCAT('distlock:', LEFT(SHA2(name, 256), 55)))`.
///
/// # Examples
///
/// ```
/// use distlock_sql::mysql::lock_key;
/// assert_eq!(lock_key("orders"), "orders");
/// let long = "x".repeat(100);
/// assert!(lock_key(&long).starts_with("distlock:"));
/// assert_eq!(lock_key(&long).chars().count(), 64);
/// ```
pub fn lock_key(name: &str) -> String {
    if name.chars().count() <= MAX_KEY_CHARS {
        return name.to_owned();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("distlock:{}", &hex[..55])
}

/// Connects `mysql://` and `mariadb://` URLs.
///
/// # Examples
///
/// ```
/// distlock_core::backend::register(std::sync::Arc::new(distlock_sql::mysql::MysqlConnector));
/// ```
#[derive(Debug)]
pub struct MysqlConnector;

#[async_trait]
impl Connector for MysqlConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["mysql", "mariadb"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        let config = MysqlConfig::from_url(url)?;
        Ok(Arc::new(MysqlBackend::open(config).await?))
    }
}

/// Maps a database error to a distlock error for `operation` (see
/// [`crate::tasks::db_error`]).
pub(crate) fn db_error(operation: &'static str) -> impl Fn(sqlx::Error) -> Error + Clone {
    crate::tasks::db_error("mysql", operation)
}

/// The database's clock in milliseconds since the Unix epoch (sqlx sets each session's
/// time zone to UTC, so no daylight-saving hour repeats).
pub(crate) const CLOCK_MS: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

/// The database's clock in microseconds since the Unix epoch: the floor of every fencing
/// token.
pub(crate) const CLOCK_US: &str = "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";
