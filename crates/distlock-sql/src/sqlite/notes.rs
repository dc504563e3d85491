//! Each lock's note (a job's run record) in `distlock_note`, written in one statement
//! under a live lease and stamped with the lease clock.

use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::Note;
use sqlx::SqlitePool;

use super::clock::LeaseClock;
use super::db_error;
use crate::notes::{NoteRow, from_row, quiet_ms};

/// Writes `name`'s note if the lease under `token` is live: the lease clock's time of the
/// write.
pub(super) async fn write(
    pool: &SqlitePool,
    clock: LeaseClock,
    (name, token): (&str, &str),
    fencing_token: u64,
    value: &str,
    quiet_for: Option<Duration>,
) -> Result<Option<u64>> {
    let now = clock.now_ms();
    let written = sqlx::query(
        "INSERT INTO distlock_note (name, value, fence, written_at_ms, quiet_until_ms)
         SELECT ?1, ?2, ?3, ?4, ?4 + ?5
         WHERE EXISTS (SELECT 1 FROM distlock_lease
                       WHERE token = ?6 AND name = ?1 AND expires_at_ms > ?4)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value, fence = excluded.fence,
             written_at_ms = excluded.written_at_ms,
             quiet_until_ms = COALESCE(excluded.quiet_until_ms, quiet_until_ms)",
    )
    .bind(name)
    .bind(value)
    .bind(i64::try_from(fencing_token).unwrap_or(i64::MAX))
    .bind(now)
    .bind(quiet_ms(quiet_for))
    .bind(token)
    .execute(pool)
    .await
    .map_err(db_error("write_note"))?;
    match written.rows_affected() {
        0 => Err(distlock_core::backend::note_refused(name)),
        _ => Ok(u64::try_from(now).ok()),
    }
}

/// `name`'s note, its quiet window measured by the lease clock now.
pub(super) async fn read(pool: &SqlitePool, clock: LeaseClock, name: &str) -> Result<Option<Note>> {
    let row: Option<NoteRow> = sqlx::query_as(
        "SELECT value, fence, written_at_ms, COALESCE(quiet_until_ms - ?2, 0)
         FROM distlock_note WHERE name = ?1",
    )
    .bind(name)
    .bind(clock.now_ms())
    .fetch_optional(pool)
    .await
    .map_err(db_error("read_note"))?;
    from_row(name, row)
}
