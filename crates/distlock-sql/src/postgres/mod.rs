//! The PostgreSQL backend (`postgres://`, `postgresql://`).
//!
//! # Modes
//!
//! * **Session mode** (the default; PostgreSQL 14 or newer): a mutex or read/write lock is
//!   `pg_advisory_lock` / `pg_advisory_lock_shared` held by a connection of its own, which
//!   goes back to a small idle set only after a clean unlock (a connection in doubt is
//!   closed, which makes the server release everything it held). A name maps to a 64-bit
//!   key by [`advisory_key`]; names sharing a key exclude each other and are reported.
//!   Waiters wait in the server's own lock queue (FIFO; a waiting writer holds back new
//!   readers), on a statement that touches no table; a cancelled wait is stopped with
//!   `pg_cancel_backend`, or by closing its connection. The fencing token is minted in the
//!   same statement that takes the lock. The session's `idle_session_timeout` is set to the
//!   lease's TTL and each renewal is a query on the lock's connection: a holder that stops
//!   renewing (paused, cut off) has its session ended by the server after the TTL, and a
//!   renewal that finds the connection dead makes the guard `Lost` at once. Semaphores,
//!   which PostgreSQL has no advisory form of, are leases as in lease mode. Not safe behind
//!   a transaction-pooling proxy.
//! * **Lease mode** (`?mode=lease`): grants are rows of the shared lease table (the same
//!   design as SQLite's), with TTLs computed from the database's clock
//!   (`clock_timestamp()`), so clients' clocks never matter. Each change runs in one
//!   transaction serialised per name by a transaction-level advisory lock, so nothing is
//!   held between transactions: safe behind a transaction-pooling proxy (PgBouncer in
//!   transaction mode). Mutex, RwLock, Semaphore, fair mode and fencing tokens (a counter
//!   row per name, only ever incremented, durable with the database). Waiters are woken
//!   with LISTEN/NOTIFY on their client's own channel; a missed notification costs at most
//!   the bounded backstop. A holder whose process dies frees the lock when its lease ends.
//!
//! All clients of one name must use the same mode: a session lock and a lease do not
//! exclude each other.
//!
//! Driver parameters (`sslmode`, `sslrootcert`, `application_name`, …) pass through the
//! URL. Passwords never appear in `Debug` output, logs or errors.
//!
//! # Examples
//!
//! ```no_run
//! # async fn f() -> distlock_core::Result<()> {
//! distlock_sql::install();
//! let client = distlock_core::Client::connect("postgres://app:pw@127.0.0.1/app").await?;
//! let guard = client.mutex("nightly-report").lock().await?;
//! # Ok(()) }
//! ```

mod advisory;
mod backend;
mod config;
mod notes;
mod session;
mod store;
mod upkeep;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Error, Result, Url};

pub use advisory::advisory_key;
pub use backend::PostgresBackend;
pub use config::{Mode, PostgresConfig};

/// Connects `postgres://` and `postgresql://` URLs.
///
/// # Examples
///
/// ```
/// distlock_core::backend::register(std::sync::Arc::new(distlock_sql::postgres::PostgresConnector));
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

/// The database's clock in milliseconds since the Unix epoch.
pub(crate) const CLOCK_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// The database's clock in microseconds since the Unix epoch: the floor of every fencing
/// token.
pub(crate) const CLOCK_US: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT";

/// The next fencing token of a name: one more than the last, and never less than the
/// database's clock in microseconds, so tokens keep increasing even if a crash loses the
/// last increments (session connections commit asynchronously) or the name's counter was
/// deleted after a long idle time (see `fences`).
pub(crate) const NEXT_FENCE: &str = "GREATEST(distlock_fence.value + 1,
                                   (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT)";

/// The first fencing token of a name without a counter: the database's clock in
/// microseconds.
pub(crate) const FIRST_FENCE: &str =
    "GREATEST(1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT)";

/// Maps a database error to a distlock error for `operation` (see
/// [`crate::tasks::db_error`]).
pub(crate) fn db_error(operation: &'static str) -> impl Fn(sqlx::Error) -> Error + Clone {
    crate::tasks::db_error("postgres", operation)
}
