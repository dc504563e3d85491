//! MySQL's and MariaDB's upkeep statements (see [`crate::fences`]): its sweep row, a batch
//! of idle counters of both modes and ended lease-table rows, and forgotten names'
//! counters, by the database's clock. Every statement commits alone: no lock is held
//! across a round trip, so a client frozen mid-sweep (a process stopped with SIGSTOP)
//! holds up no lease transaction.

use std::collections::BTreeSet;
use std::time::Duration;

use distlock_core::Result;
use sqlx::{MySqlConnection, MySqlPool};

use super::{CLOCK_MS, CLOCK_US, db_error, lock_key};
use crate::fences::{
    ENDING_ROWS, FLOORED, SWEEP_LIMIT, SweepMark, Upkeep, abandoned_ms, forget_idle_us, ttl_us,
};
use crate::rows::bind_marks;

/// How many names one statement of a forget names.
const CHUNK: usize = 500;

/// The upkeep of one MySQL or MariaDB database, on a client's pool.
#[derive(Debug, Clone)]
pub(crate) struct MysqlUpkeep(pub(crate) MySqlPool);

impl Upkeep for MysqlUpkeep {
    const BACKEND: &'static str = "mysql";

    /// Found rows and changed rows agree, whichever the driver counts: the condition is in
    /// the `WHERE`, and the clock moves.
    async fn mark(self, every: Duration, mark: SweepMark) -> sqlx::Result<bool> {
        let (older_than, set_back) = mark.bounds(every);
        let done = sqlx::query(&format!(
            "UPDATE distlock_sweep SET last_us = {CLOCK_US} - ?
             WHERE id = 1 AND (last_us < {CLOCK_US} - ? OR last_us > {CLOCK_US} + ?)"
        ))
        .bind(set_back)
        .bind(older_than)
        .bind(older_than)
        .execute(&self.0)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Lease mode's idle counters, the lease tables' ended rows, and session mode's
    /// records of keys no connection holds, with the full names of those keys.
    async fn sweep(self, fence_ttl: Duration) -> sqlx::Result<u64> {
        let mut conn = self.0.acquire().await?;
        let idle = format!("value >= {FLOORED} AND value < {CLOCK_US} - ?");
        let counters = sweep_rows(
            &mut conn,
            "distlock_fence",
            "lock_key",
            &idle,
            ttl_us(fence_ttl),
        )
        .await?;
        let mut ended = 0;
        for table in ENDING_ROWS {
            let long_ended = format!("expires_at_ms < {CLOCK_MS} - ?");
            let swept = sweep_rows(&mut conn, table, "token", &long_ended, abandoned_ms());
            ended = ended.max(swept.await?);
        }
        let records = sqlx::query(&format!(
            "DELETE FROM distlock_session_lock
             WHERE fence < {CLOCK_US} - ? AND IS_USED_LOCK(lock_key) IS NULL LIMIT ?"
        ))
        .bind(ttl_us(fence_ttl))
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
        Ok(counters.max(records.rows_affected()).max(ended))
    }

    /// In both modes' tables (a session lock's only while nobody holds its `GET_LOCK`),
    /// and the names no row refers to any more. Each statement names its rows by primary
    /// key.
    async fn forget(self, names: Vec<String>) -> Result<usize> {
        let keys: BTreeSet<String> = names.iter().map(|n| lock_key(n)).collect();
        let keys: Vec<String> = keys.into_iter().collect();
        // Each table with a counter per key, and when its row is idle (bind: the idle time).
        let idle_counters = [
            (
                "distlock_fence",
                format!("value >= {FLOORED} AND value < {CLOCK_US} - ?"),
            ),
            (
                "distlock_session_lock",
                format!("fence < {CLOCK_US} - ? AND IS_USED_LOCK(lock_key) IS NULL"),
            ),
        ];
        let mut forgotten = 0;
        for chunk in keys.chunks(CHUNK) {
            let marks = bind_marks(chunk.len());
            for (table, idle) in &idle_counters {
                let text = format!("DELETE FROM {table} WHERE lock_key IN ({marks}) AND {idle}");
                let query = chunk.iter().fold(sqlx::query(&text), |q, key| q.bind(key));
                let done = query
                    .bind(forget_idle_us())
                    .execute(&self.0)
                    .await
                    .map_err(db_error("forget"))?;
                forgotten += done.rows_affected() as usize;
            }
            let text = format!(
                "DELETE FROM distlock_name WHERE lock_key IN ({marks})
                   AND lock_key NOT IN (SELECT lock_key FROM distlock_session_lock)
                   AND lock_key NOT IN (SELECT lock_key FROM distlock_session_waiter)"
            );
            let unused = chunk.iter().fold(sqlx::query(&text), |q, key| q.bind(key));
            unused.execute(&self.0).await.map_err(db_error("forget"))?;
        }
        Ok(forgotten)
    }
}

/// Deletes up to [`SWEEP_LIMIT`] rows of `table` where `condition` holds (its one bind:
/// `arg`): their keys (column `key`) read first, by a read that locks nothing, then deleted
/// by key, `condition` checked again, in statements that commit alone. No statement scans
/// the table under locks, and none leaves a lock held across a round trip.
async fn sweep_rows(
    conn: &mut MySqlConnection,
    table: &str,
    key: &str,
    condition: &str,
    arg: i64,
) -> sqlx::Result<u64> {
    // Read as bytes: the keys' binary collation reads as binary to the driver.
    let keys: Vec<Vec<u8>> = sqlx::query_scalar(&format!(
        "SELECT {key} FROM {table} WHERE {condition} LIMIT ?"
    ))
    .bind(arg)
    .bind(SWEEP_LIMIT)
    .fetch_all(&mut *conn)
    .await?;
    let mut deleted = 0;
    for chunk in keys.chunks(CHUNK) {
        let text = format!(
            "DELETE FROM {table} WHERE {key} IN ({}) AND {condition}",
            bind_marks(chunk.len())
        );
        let query = chunk.iter().fold(sqlx::query(&text), |q, k| q.bind(k));
        deleted += query.bind(arg).execute(&mut *conn).await?.rows_affected();
    }
    Ok(deleted)
}
