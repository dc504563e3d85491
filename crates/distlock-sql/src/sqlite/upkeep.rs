//! SQLite's upkeep statements (see [`crate::fences`]): its sweep row, a batch of idle
//! counters and ended lease-table rows, and forgotten names' counters. Counters are
//! compared with this process's clock in microseconds (the clients of one database share a
//! machine, and a token's floor is that clock), lease-table rows with the database's lease
//! clock.

use std::time::Duration;

use distlock_core::Result;
use sqlx::SqlitePool;

use super::clock::LeaseClock;
use super::db_error;
use crate::fences::{
    ENDING_ROWS, FLOORED, SWEEP_LIMIT, SweepMark, Upkeep, abandoned_ms, forget_idle_us, ttl_us,
};
use crate::lease_table::now_ms;
use crate::rows::bind_marks;

/// How many names one statement of a forget names.
const CHUNK: usize = 500;

/// The upkeep of one SQLite database, on a client's pool, by its lease clock.
#[derive(Debug, Clone)]
pub(super) struct SqliteUpkeep {
    pub(super) pool: SqlitePool,
    pub(super) clock: LeaseClock,
}

/// This process's clock in microseconds, less `idle`.
fn idle_below(idle_us: i64) -> i64 {
    now_ms().saturating_mul(1000).saturating_sub(idle_us)
}

impl Upkeep for SqliteUpkeep {
    const BACKEND: &'static str = "sqlite";

    /// Reads the row before it writes it, for a claim: an UPDATE takes the database's
    /// write lock even where it changes nothing, and every client looks as it opens the
    /// database.
    async fn mark(self, every: Duration, mark: SweepMark) -> sqlx::Result<bool> {
        let now_us = now_ms().saturating_mul(1000);
        let (older_than, set_back) = mark.bounds(every);
        if let SweepMark::Claim = mark {
            let last: Option<i64> =
                sqlx::query_scalar("SELECT last_us FROM distlock_sweep WHERE id = 1")
                    .fetch_optional(&self.pool)
                    .await?;
            let due = last.is_some_and(|last| {
                last < now_us.saturating_sub(older_than) || last > now_us.saturating_add(older_than)
            });
            if !due {
                return Ok(false);
            }
        }
        let done = sqlx::query(
            "UPDATE distlock_sweep SET last_us = ?1
             WHERE id = 1 AND (last_us < ?2 OR last_us > ?3)",
        )
        .bind(now_us.saturating_sub(set_back))
        .bind(now_us.saturating_sub(older_than))
        .bind(now_us.saturating_add(older_than))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn sweep(self, fence_ttl: Duration) -> sqlx::Result<u64> {
        let done = sqlx::query(
            "DELETE FROM distlock_fence WHERE name IN
               (SELECT name FROM distlock_fence WHERE value >= ?1 AND value < ?2 LIMIT ?3)",
        )
        .bind(FLOORED)
        .bind(idle_below(ttl_us(fence_ttl)))
        .bind(SWEEP_LIMIT)
        .execute(&self.pool)
        .await?;
        let mut most = done.rows_affected();
        let long_ended = self.clock.now_ms().saturating_sub(abandoned_ms());
        for table in ENDING_ROWS {
            let ended = sqlx::query(&format!(
                "DELETE FROM {table} WHERE rowid IN
                   (SELECT rowid FROM {table} WHERE expires_at_ms < ?1 LIMIT ?2)"
            ))
            .bind(long_ended)
            .bind(SWEEP_LIMIT)
            .execute(&self.pool)
            .await?;
            most = most.max(ended.rows_affected());
        }
        Ok(most)
    }

    async fn forget(self, names: Vec<String>) -> Result<usize> {
        let idle_below = idle_below(forget_idle_us());
        let mut forgotten = 0;
        for chunk in names.chunks(CHUNK) {
            let text = format!(
                "DELETE FROM distlock_fence WHERE name IN ({}) AND value >= ? AND value < ?",
                bind_marks(chunk.len())
            );
            let query = chunk
                .iter()
                .fold(sqlx::query(&text), |q, name| q.bind(name));
            let done = query
                .bind(FLOORED)
                .bind(idle_below)
                .execute(&self.pool)
                .await
                .map_err(db_error("forget"))?;
            forgotten += done.rows_affected() as usize;
        }
        Ok(forgotten)
    }
}
