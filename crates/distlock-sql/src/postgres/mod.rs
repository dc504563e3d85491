//! The PostgreSQL backend (`postgres://`, `postgresql://`).
//!
//! # Modes
//!
//! * **Lease mode** (`?mode=lease`): grants are rows of the shared lease table (the same
//!   design as SQLite's), with TTLs computed from the database's clock
//!   (`clock_timestamp()`), so clients' clocks never matter. Each change runs in one
//!   transaction serialised per name by a transaction-level advisory lock, so nothing is
//!   held between transactions: safe behind a transaction-pooling proxy (PgBouncer in
//!   transaction mode). Mutex, RwLock, Semaphore, fair mode and fencing tokens (a counter
//!   row per name, only ever incremented, durable with the database). Waiters are woken
//!   with LISTEN/NOTIFY on their client's own channel; a missed notification costs at most
//!   the bounded backstop. A holder whose process dies frees the lock when its lease ends.
//! * **Session mode** (advisory locks held by a dedicated session; the default) is not
//!   available yet: a URL without `mode=lease` is refused with a clear error.
//!
//! Driver parameters (`sslmode`, `sslrootcert`, `application_name`, …) pass through the
//! URL. Passwords never appear in `Debug` output, logs or errors.
//!
//! # Examples
//!
//! ```no_run
//! # async fn f() -> distlock_core::Result<()> {
//! distlock_sql::install();
//! let client = distlock_core::Client::connect("postgres://app:pw@127.0.0.1/app?mode=lease").await?;
//! let guard = client.mutex("nightly-report").lock().await?;
//! # Ok(()) }
//! ```

mod advisory;
mod backend;
mod config;
mod sessions;
mod store;

use std::sync::Arc;

use distlock_core::{Backend, Connector, Error, ErrorKind, Result, Url, async_trait};

pub use advisory::advisory_key;
pub use backend::PostgresBackend;
pub use config::{Mode, PostgresConfig};

/// Connects `postgres://` and `postgresql://` URLs.
///
/// # Examples
///
/// ```
/// distlock_core::register(std::sync::Arc::new(distlock_sql::postgres::PostgresConnector));
/// ```
#[derive(Debug)]
pub struct PostgresConnector;

#[async_trait]
impl Connector for PostgresConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        let config = PostgresConfig::from_url(url)?;
        Ok(Arc::new(PostgresBackend::open(config).await?))
    }
}

/// Maps a database error to a distlock error for `operation`. Connection failures,
/// serialisation failures, deadlocks and a server shutting down are temporary.
pub(crate) fn db_error(operation: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |err| {
        let temporary = match &err {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08")
                    || code.starts_with("57P")
                    || code == "40001"
                    || code == "40P01"
            }),
            _ => false,
        };
        let kind = match temporary {
            true => ErrorKind::Unavailable,
            false => ErrorKind::Backend,
        };
        let out = Error::new(kind, format!("postgres {operation} failed"))
            .with_backend("postgres")
            .with_operation(operation)
            .with_source(err);
        if temporary { out.temporary() } else { out }
    }
}
