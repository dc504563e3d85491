//! The SQLite backend: the embedded default. Many processes on one machine share one
//! database file; every change happens inside a `BEGIN IMMEDIATE` transaction, in WAL mode
//! with a busy timeout.
//!
//! SQLite cannot push, so waiters poll with jittered backoff (short at first, bounded by
//! the holder's remaining lease; a waiter others yield to polls more often the nearer it is
//! to the head of the queue). On Linux the backend also pushes: each process listens on an
//! abstract Unix datagram socket named in its queue rows, and whoever frees a lock wakes
//! the head waiter through it, so hand-offs between processes do not wait for a backoff to
//! end. A lost wake-up only costs latency.
//!
//! Leases expire by this machine's monotonic clock, which no step of the wall clock moves
//! (see `clock`): a clock jumping forward expires no lease early.
//!
//! The database has one write lock, which a process stopped in the middle of a write keeps
//! until it runs again, holding up every other client's writes (their renewals too). So
//! each write is short (a renewal writes in one statement), a client opening a database
//! that needs no change only reads it (and looks whether the idle-counter sweep is due
//! before it claims it), and [`Backend::pause_writes`] lets a process that stops itself
//! (Ctrl-Z) stop between writes.

mod backend;
mod busy;
mod clock;
mod config;
mod notes;
mod store;
mod upkeep;
mod wake;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Error, ErrorKind, Result, Url};

pub use backend::SqliteBackend;
pub use config::SqliteConfig;

/// Connects `sqlite://` URLs.
///
/// # Examples
///
/// ```
/// distlock_core::backend::register(std::sync::Arc::new(distlock_sql::sqlite::SqliteConnector));
/// ```
#[derive(Debug)]
pub struct SqliteConnector;

#[async_trait]
impl Connector for SqliteConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["sqlite"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        let config = SqliteConfig::from_url(url)?;
        Ok(Arc::new(SqliteBackend::open(config).await?))
    }
}

/// SQLite's primary result code for a file it cannot open.
pub(crate) const SQLITE_CANTOPEN: i32 = 14;

/// SQLite's primary result code for a write to a database this connection may only read.
const SQLITE_READONLY: i32 = 8;

/// The primary result code of a SQLite error (its extended code carries more in its upper
/// bits).
pub(crate) fn primary_code(db: &dyn sqlx::error::DatabaseError) -> Option<i32> {
    db.code()
        .and_then(|code| code.parse::<i32>().ok())
        .map(|code| code & 0xff)
}

/// Maps a database error to a distlock error for `operation`. A write this process may
/// not make (a database file another user made, and this one may only read) is bad
/// input: every client of a lock database writes it.
pub(crate) fn db_error(operation: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |err| {
        if let sqlx::Error::Database(db) = &err
            && primary_code(db.as_ref()) == Some(SQLITE_READONLY)
        {
            return Error::invalid(format!(
                "sqlite {operation} failed: this process may not write the lock database, and every client writes it (with the -wal and -shm files beside it): {db}"
            ))
            .with_backend("sqlite")
            .with_operation(operation);
        }
        let (kind, temporary) = match &err {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
                (ErrorKind::Unavailable, true)
            }
            sqlx::Error::Database(db)
                if db.message().contains("locked") || db.message().contains("busy") =>
            {
                (ErrorKind::Unavailable, true)
            }
            _ => (ErrorKind::Backend, false),
        };
        let out = Error::new(kind, format!("sqlite {operation} failed"))
            .with_backend("sqlite")
            .with_operation(operation)
            .with_source(err);
        if temporary { out.temporary() } else { out }
    }
}
