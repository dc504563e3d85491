//! The database schemes the documents offer, on PostgreSQL or MySQL/MariaDB, in a table of
//! the run's own (`distlock_torture_<id>`, one row: the lock's name, a version, a value):
//!
//! - `select-for-update`: a transaction that selects the row `FOR UPDATE` holds the lock
//!   (a waiter blocks in the server) until it commits; a holder that dies has its
//!   transaction rolled back by the server when its connection closes.
//! - `version-cas`: optimistic; read the value and its version, then
//!   `UPDATE … SET value = value + 1, version = version + 1 WHERE version = <read>`: the
//!   update that finds the version moved on changes nothing, and its worker tries again.
//!   The row is the counter, updated atomically, not the counter file; the new version is a
//!   fencing token.

use std::time::Duration;

use distlock::sql::Mode;
use distlock::{Error, ErrorKind, Result, Url};
use distlock_check::history::monotonic_ns;
use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyPool, Row, Transaction};

use super::record::Recorder;
use super::steps::{BETWEEN_READ_AND_CAS, Orders};
use crate::args::Scheme;

/// How long a broken scheme waits between tries.
const RETRY: Duration = Duration::from_millis(5);

/// The longest one statement of a database scheme may take (a `SELECT … FOR UPDATE` that
/// waits for the lock is bounded by the run's end instead).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `scheme` is one of the documents' database schemes.
pub fn on_database(scheme: Scheme) -> bool {
    matches!(scheme, Scheme::SelectForUpdate | Scheme::VersionCas)
}

/// The SQL dialect of a lock URL the database schemes run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Postgres,
    MySql,
}

/// The driver URL and dialect of `url`: a `postgres://`, `mysql://` or `mariadb://` URL,
/// distlock's own query options left out, the driver's (TLS among them) kept.
fn driver(url: &str) -> Result<(String, Dialect)> {
    let refused = || {
        Error::invalid(
            "the database schemes of the documents run on PostgreSQL or MySQL/MariaDB: give a \
             postgres://, mysql:// or mariadb:// URL",
        )
    };
    let parsed = Url::parse(url).map_err(|_| refused())?;
    let (_, driver) = Mode::split(&parsed)?;
    let driver = driver.to_string();
    match parsed.scheme() {
        "postgres" | "postgresql" => Ok((driver, Dialect::Postgres)),
        "mysql" => Ok((driver, Dialect::MySql)),
        "mariadb" => Ok((driver.replacen("mariadb://", "mysql://", 1), Dialect::MySql)),
        _ => Err(refused()),
    }
}

/// The run's table for the lock `name` (its id after the last `/`).
fn table(name: &str) -> String {
    let id: String = name
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("distlock_torture_{id}")
}

/// A pool of one connection to `url`.
async fn connect(url: &str) -> Result<(AnyPool, Dialect)> {
    sqlx::any::install_default_drivers();
    let (driver_url, dialect) = driver(url)?;
    // The driver's TLS needs rustls's process-wide provider. (The URL, its TLS files among
    // it, was checked by distlock's client before the run.)
    distlock::sql::use_ring_provider();
    let pool = AnyPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(CALL_TIMEOUT)
        .connect(&driver_url)
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot reach {}", distlock::redact_url(url)),
            )
            .with_source(e)
            .temporary()
        })?;
    Ok((pool, dialect))
}

/// Creates the run's table for the lock `name` at `url`, with its one row.
pub async fn prepare(url: &str, name: &str) -> Result<()> {
    let (pool, dialect) = connect(url).await?;
    let table = table(name);
    let create = format!(
        "CREATE TABLE {table} (name VARCHAR(255) PRIMARY KEY, version BIGINT NOT NULL, value BIGINT NOT NULL)"
    );
    call(sqlx::query(&create).execute(&pool)).await?;
    let insert = format!(
        "INSERT INTO {table} (name, version, value) VALUES ({}, 0, 0)",
        mark(dialect, 1)
    );
    let inserted = call(sqlx::query(&insert).bind(name).execute(&pool)).await;
    pool.close().await;
    if inserted.is_err() {
        remove(url, name).await;
    }
    inserted.map(|_| ())
}

/// Drops the run's table after the run. Best effort: a table left behind is no harm to
/// the verdict.
pub async fn remove(url: &str, name: &str) {
    if let Ok((pool, _)) = connect(url).await {
        let drop = format!("DROP TABLE IF EXISTS {}", table(name));
        let _ = call(sqlx::query(&drop).execute(&pool)).await;
        pool.close().await;
    }
}

/// The `n`th bind mark of `dialect`.
fn mark(dialect: Dialect, n: usize) -> String {
    match dialect {
        Dialect::Postgres => format!("${n}"),
        Dialect::MySql => "?".into(),
    }
}

/// A grant of a database scheme.
pub struct SqlGrant {
    /// Its fencing token: the new version (`version-cas`), or 0.
    pub token: u64,
    /// The value the counter row was updated to, for `version-cas` (its critical section
    /// done in the update).
    pub counted: Option<u64>,
}

/// One worker's lock of a database scheme.
pub struct SqlLock {
    scheme: Scheme,
    pool: AnyPool,
    dialect: Dialect,
    name: String,
    table: String,
    /// The transaction holding the row, while `select-for-update` holds the lock.
    holding: Option<Transaction<'static, Any>>,
}

impl SqlLock {
    /// Connects the lock `name` of `scheme` at `url`.
    pub async fn open(url: &str, name: &str, scheme: Scheme) -> Result<SqlLock> {
        let (pool, dialect) = connect(url).await?;
        Ok(SqlLock {
            scheme,
            pool,
            dialect,
            name: name.to_owned(),
            table: table(name),
            holding: None,
        })
    }

    /// Waits for the lock until `until` (on the shared clock): a `Timeout` error if it did
    /// not come. `version-cas` records its read of the counter row.
    pub async fn acquire(
        &mut self,
        hold: Duration,
        until: u64,
        orders: &Orders,
        recorder: &Recorder,
        me: u32,
    ) -> Result<SqlGrant> {
        let left = Duration::from_nanos(until.saturating_sub(monotonic_ns()));
        if self.scheme == Scheme::SelectForUpdate {
            let select = format!(
                "SELECT name FROM {} WHERE name = {} FOR UPDATE",
                self.table,
                mark(self.dialect, 1)
            );
            let mut tx = call(self.pool.begin()).await?;
            match tokio::time::timeout(
                left,
                sqlx::query(&select).bind(&self.name).fetch_one(&mut *tx),
            )
            .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => return Err(sql_error(err)),
                Err(_) => return Err(Error::new(ErrorKind::Timeout, "the run ended first")),
            }
            self.holding = Some(tx);
            return Ok(SqlGrant {
                token: 0,
                counted: None,
            });
        }
        let read = format!(
            "SELECT version, value FROM {} WHERE name = {}",
            self.table,
            mark(self.dialect, 1)
        );
        let update = format!(
            "UPDATE {} SET version = version + 1, value = {} WHERE name = {} AND version = {}",
            self.table,
            mark(self.dialect, 1),
            mark(self.dialect, 2),
            mark(self.dialect, 3)
        );
        loop {
            let row = call(sqlx::query(&read).bind(&self.name).fetch_one(&self.pool)).await?;
            let (version, value): (i64, i64) = (row.get(0), row.get(1));
            recorder.record(
                me,
                distlock_check::history::What::CounterRead {
                    value: value as u64,
                },
            );
            // The business logic between the read and the write.
            tokio::time::sleep(hold / 2).await;
            orders.at(BETWEEN_READ_AND_CAS, recorder, me);
            let done = call(
                sqlx::query(&update)
                    .bind(value + 1)
                    .bind(&self.name)
                    .bind(version)
                    .execute(&self.pool),
            )
            .await?;
            if done.rows_affected() == 1 {
                return Ok(SqlGrant {
                    token: version as u64 + 1,
                    counted: Some(value as u64 + 1),
                });
            }
            if monotonic_ns() + RETRY.as_nanos() as u64 >= until {
                return Err(Error::new(ErrorKind::Timeout, "the run ended first"));
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Releases the lock: `select-for-update` commits its transaction (`version-cas`
    /// holds nothing). Whether it was still held.
    pub async fn release(&mut self) -> Result<bool> {
        match self.holding.take() {
            Some(tx) => call(tx.commit()).await.map(|()| true),
            None => Ok(self.scheme == Scheme::VersionCas),
        }
    }
}

/// A database error, temporary (the worker tries again).
fn sql_error(err: sqlx::Error) -> Error {
    Error::new(ErrorKind::Unavailable, format!("database: {err}")).temporary()
}

/// One statement, bounded in time.
async fn call<T>(request: impl std::future::Future<Output = sqlx::Result<T>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, request).await {
        Ok(result) => result.map_err(sql_error),
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("the database did not answer within {CALL_TIMEOUT:?}"),
        )
        .temporary()),
    }
}
