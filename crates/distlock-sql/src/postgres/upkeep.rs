//! PostgreSQL's upkeep statements (see [`crate::fences`]): its sweep row, a batch of idle
//! counters and ended lease-table rows, and forgotten names' counters, by the database's
//! clock. Both modes keep their counters in one table.

use std::time::Duration;

use distlock_core::Result;
use sqlx::PgPool;

use super::{CLOCK_MS, CLOCK_US, db_error};
use crate::fences::{
    ENDING_ROWS, FLOORED, SWEEP_LIMIT, SweepMark, Upkeep, abandoned_ms, forget_idle_us, ttl_us,
};

/// The upkeep of one PostgreSQL database, on a client's pool.
#[derive(Debug, Clone)]
pub(crate) struct PgUpkeep(pub(crate) PgPool);

impl Upkeep for PgUpkeep {
    const BACKEND: &'static str = "postgres";

    async fn mark(self, every: Duration, mark: SweepMark) -> sqlx::Result<bool> {
        let (older_than, set_back) = mark.bounds(every);
        let done = sqlx::query(&format!(
            "UPDATE distlock_sweep SET last_us = {CLOCK_US} - $2
             WHERE id = 1 AND (last_us < {CLOCK_US} - $1 OR last_us > {CLOCK_US} + $1)"
        ))
        .bind(older_than)
        .bind(set_back)
        .execute(&self.0)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn sweep(self, fence_ttl: Duration) -> sqlx::Result<u64> {
        let done = sqlx::query(&format!(
            "DELETE FROM distlock_fence WHERE ctid = ANY(ARRAY(
               SELECT ctid FROM distlock_fence
               WHERE value >= $1 AND value < {CLOCK_US} - $2 LIMIT $3))"
        ))
        .bind(FLOORED)
        .bind(ttl_us(fence_ttl))
        .bind(SWEEP_LIMIT)
        .execute(&self.0)
        .await?;
        let mut most = done.rows_affected();
        for table in ENDING_ROWS {
            let ended = sqlx::query(&format!(
                "DELETE FROM {table} WHERE ctid = ANY(ARRAY(
                   SELECT ctid FROM {table} WHERE expires_at_ms < {CLOCK_MS} - $1 LIMIT $2))"
            ))
            .bind(abandoned_ms())
            .bind(SWEEP_LIMIT)
            .execute(&self.0)
            .await?;
            most = most.max(ended.rows_affected());
        }
        Ok(most)
    }

    async fn forget(self, names: Vec<String>) -> Result<usize> {
        let done = sqlx::query(&format!(
            "DELETE FROM distlock_fence
             WHERE name = ANY($1) AND value >= $2 AND value < {CLOCK_US} - $3"
        ))
        .bind(names)
        .bind(FLOORED)
        .bind(forget_idle_us())
        .execute(&self.0)
        .await
        .map_err(db_error("forget"))?;
        Ok(done.rows_affected() as usize)
    }
}
