#![doc = include_str!("../docs.md")]

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
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod notes;
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
