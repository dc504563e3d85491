//! SQL backends for distlock, on one lease-table design shared by every dialect.
//!
//! SQLite, the embedded default (`sqlite:///path/to/locks.db`); PostgreSQL (`postgres://…`,
//! see [`postgres`]) and MySQL/MariaDB (`mysql://…`, `mariadb://…`, see [`mysql`]), each
//! with advisory locks held by dedicated sessions or, in lease mode, the same
//! [lease table](lease_table) as SQLite's.
//!
//! # The lease table
//!
//! * `distlock_lease`: one row per grant — name, request token, owner, kind, permits,
//!   fencing token, expiry, and the holder's host, pid and acquisition time.
//! * `distlock_waiter`: one row per waiting request, in arrival order (`seq`); a row expires
//!   unless its waiter keeps polling, so a dead waiter never blocks those behind it.
//! * `distlock_fence`: the per-name fencing counter. It is only ever increased, in the
//!   same transaction that inserts the grant, never below the clock in microseconds, and
//!   deleted only after `fence_ttl` without a grant, so tokens keep increasing across
//!   restarts of every client.
//!
//! A grant is decided by [`distlock_core::backend::admit`] over the rows read inside one write
//! transaction, so the rules are the same as every other backend's.
//!
//! # Fencing the resource
//!
//! [`fenced`] writes the statement that makes a database refuse a stale holder's write
//! (PostgreSQL, MySQL/MariaDB and SQLite), whatever backend the lock itself lives on.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! distlock_sql::install();
//! let url = format!("sqlite://{}", dir.path().join("locks.db").display());
//! let client = distlock_core::Client::connect(&url).await?;
//! let guard = client.mutex("nightly-report").lock().await?;
//! println!("token {}", guard.fencing_token());
//! # Ok(()) }
//! ```

pub mod fenced;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod fences;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use mode::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL, Mode, ServerParams};
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod lease_engine;
pub mod lease_table;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod mode;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod rows;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod sentinel;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod session;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod session_dialect;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod split;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod tasks;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use tasks::connect_error;

/// Gives rustls ring's crypto provider as the process-wide one, unless the program chose
/// one already. sqlx verifies a certificate without its host name (`verify-ca`) through
/// that provider, which rustls cannot pick itself when two are built in; every client of
/// this crate calls it before it connects, and so must a program that opens its own sqlx
/// connections with TLS.
///
/// # Examples
///
/// ```
/// distlock_sql::use_ring_provider();
/// distlock_sql::use_ring_provider(); // a second call changes nothing
/// ```
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub fn use_ring_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Registers the SQL connectors this crate's features enable (`sqlite://` with `sqlite`,
/// `postgres://` with `postgres`, `mysql://` and `mariadb://` with `mysql`) with the core's URL registry.
///
/// # Examples
///
/// See the [crate documentation](crate).
pub fn install() {
    #[cfg(feature = "sqlite")]
    distlock_core::backend::register(std::sync::Arc::new(sqlite::SqliteConnector));
    #[cfg(feature = "postgres")]
    distlock_core::backend::register(std::sync::Arc::new(postgres::PostgresConnector));
    #[cfg(feature = "mysql")]
    distlock_core::backend::register(std::sync::Arc::new(mysql::MysqlConnector));
}
