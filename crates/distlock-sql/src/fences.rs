//! The lifetime of fencing counters: every backend keeps one counter row per lock name, so
//! a service locking `orders/<id>` would grow the table by a row per order, for ever. A
//! counter never falls below the clock in microseconds at its last grant, so a counter
//! below the clock less `fence_ttl` has been idle at least that long. Each client deletes
//! such rows on a task of its own ([`Sweeper`]), and a later grant seeds the name's counter
//! again from the clock, above every token it gave.
//!
//! Counters below [`FLOORED`] were written by a distlock that counted from 1 (PostgreSQL's
//! lease mode and SQLite before counters took the clock's floor): they are kept, since a
//! client of that version would seed a deleted one at 1 again.

use std::future::Future;
use std::time::Duration;

use tokio::task::AbortHandle;

/// The most idle counters one statement deletes.
pub(crate) const SWEEP_LIMIT: i64 = 10_000;

/// The smallest counter that took the clock's floor: the clock in microseconds in 2001.
pub(crate) const FLOORED: i64 = 1_000_000_000_000_000;

/// How often a client sweeps after its first sweep, which runs as it connects.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The most batches of [`SWEEP_LIMIT`] one sweep deletes.
const MAX_BATCHES: usize = 100;

/// How long one batch may take before the sweep is given up until the next.
const BATCH_TIMEOUT: Duration = Duration::from_secs(30);

/// `fence_ttl` in microseconds, for SQL that subtracts it from the database's clock.
pub(crate) fn ttl_us(fence_ttl: Duration) -> i64 {
    i64::try_from(fence_ttl.as_micros()).unwrap_or(i64::MAX)
}

/// The task that deletes a client's idle counters: at once, then every hour, in batches
/// until one deletes fewer than [`SWEEP_LIMIT`]. A failure (a user without `DELETE`, a
/// server that refuses the statement, a lock wait past [`BATCH_TIMEOUT`]) is logged and
/// tried again at the next sweep: the client works on without it. Dropping it stops the
/// task.
#[derive(Debug)]
pub(crate) struct Sweeper(AbortHandle);

impl Sweeper {
    /// Starts sweeping with `batch`, which deletes up to [`SWEEP_LIMIT`] idle counters of
    /// `backend` and says how many went.
    pub(crate) fn start<F, Fut>(backend: &'static str, batch: F) -> Sweeper
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = sqlx::Result<u64>> + Send + 'static,
    {
        let task = tokio::spawn(async move {
            loop {
                for _ in 0..MAX_BATCHES {
                    match tokio::time::timeout(BATCH_TIMEOUT, batch()).await {
                        Ok(Ok(deleted)) if deleted >= SWEEP_LIMIT as u64 => continue,
                        Ok(Ok(_)) => {}
                        Ok(Err(err)) => tracing::warn!(
                            backend,
                            error = %err,
                            "could not delete idle fencing counters; trying again in an hour"
                        ),
                        Err(_) => tracing::warn!(
                            backend,
                            "deleting idle fencing counters took over {BATCH_TIMEOUT:?}; trying again in an hour"
                        ),
                    }
                    break;
                }
                tokio::time::sleep(SWEEP_EVERY).await;
            }
        });
        Sweeper(task.abort_handle())
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Deletes up to [`SWEEP_LIMIT`] of PostgreSQL's idle counters.
#[cfg(feature = "postgres")]
pub(crate) async fn sweep_postgres(pool: &sqlx::PgPool, fence_ttl: Duration) -> sqlx::Result<u64> {
    use crate::postgres::CLOCK_US;
    let done = sqlx::query(&format!(
        "DELETE FROM distlock_fence WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM distlock_fence
           WHERE value >= $1 AND value < {CLOCK_US} - $2 LIMIT $3))"
    ))
    .bind(FLOORED)
    .bind(ttl_us(fence_ttl))
    .bind(SWEEP_LIMIT)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes up to [`SWEEP_LIMIT`] of MySQL's idle lease-mode counters, and of session
/// mode's records of keys no connection holds, with the full names of those keys. The
/// lease-mode counters go in a read-committed transaction, so the scan locks only the rows
/// it deletes, not every row a lease transaction may want.
#[cfg(feature = "mysql")]
pub(crate) async fn sweep_mysql(pool: &sqlx::MySqlPool, fence_ttl: Duration) -> sqlx::Result<u64> {
    use crate::mysql::CLOCK_US;
    let ttl = ttl_us(fence_ttl);
    let mut conn = pool.acquire().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .execute(&mut *conn)
        .await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let counters = sqlx::query(&format!(
        "DELETE FROM distlock_fence WHERE value >= ? AND value < {CLOCK_US} - ? LIMIT ?"
    ))
    .bind(FLOORED)
    .bind(ttl)
    .bind(SWEEP_LIMIT)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let records = sqlx::query(&format!(
        "DELETE FROM distlock_session_lock
         WHERE fence < {CLOCK_US} - ? AND IS_USED_LOCK(lock_key) IS NULL LIMIT ?"
    ))
    .bind(ttl)
    .bind(SWEEP_LIMIT)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM distlock_name
         WHERE lock_key NOT IN (SELECT lock_key FROM distlock_session_lock)
           AND lock_key NOT IN (SELECT lock_key FROM distlock_session_waiter) LIMIT ?",
    )
    .bind(SWEEP_LIMIT)
    .execute(&mut *conn)
    .await?;
    Ok(counters.rows_affected().max(records.rows_affected()))
}

/// Deletes up to [`SWEEP_LIMIT`] of SQLite's idle counters, by this process's clock (the
/// clients of one database share a machine).
#[cfg(feature = "sqlite")]
pub(crate) async fn sweep_sqlite(
    pool: &sqlx::SqlitePool,
    fence_ttl: Duration,
) -> sqlx::Result<u64> {
    let idle_below = crate::lease_table::now_ms()
        .saturating_mul(1000)
        .saturating_sub(ttl_us(fence_ttl));
    let done = sqlx::query(
        "DELETE FROM distlock_fence WHERE name IN
           (SELECT name FROM distlock_fence WHERE value >= ?1 AND value < ?2 LIMIT ?3)",
    )
    .bind(FLOORED)
    .bind(idle_below)
    .bind(SWEEP_LIMIT)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
