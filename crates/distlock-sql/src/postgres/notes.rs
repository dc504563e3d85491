//! Each lock's note (a job's run record) in `distlock_note`, written under a live lease
//! (its row locked against a concurrent release or break until the write commits) and
//! stamped with the server's clock.

use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::Note;
use sqlx::{PgConnection, PgPool};

use super::{CLOCK_MS, db_error};
use crate::notes::{NoteRow, from_row, quiet_ms};
use crate::session::NoteWrite;

/// The note table, made apart from the other tables (a database made by an older
/// distlock lacks it).
pub(super) const NOTE_TABLE: &str = "CREATE TABLE IF NOT EXISTS distlock_note (
    name           TEXT PRIMARY KEY,
    value          TEXT NOT NULL,
    fence          BIGINT NOT NULL,
    written_at_ms  BIGINT NOT NULL,
    quiet_until_ms BIGINT
)";

/// Writes `name`'s note if the lease under `token` is live: the server's time of the
/// write.
pub(super) async fn write(
    pool: &PgPool,
    name: &str,
    token: &str,
    fencing_token: u64,
    value: &str,
    quiet_for: Option<Duration>,
) -> Result<Option<u64>> {
    let written: Option<i64> = sqlx::query_scalar(&format!(
        "WITH live AS (
             SELECT 1 FROM distlock_lease
             WHERE token = $2 AND name = $1 AND expires_at_ms > {CLOCK_MS} FOR SHARE
         ), now AS (SELECT {CLOCK_MS} AS ms)
         INSERT INTO distlock_note (name, value, fence, written_at_ms, quiet_until_ms)
         SELECT $1, $3, $4, now.ms, now.ms + $5::BIGINT FROM now WHERE EXISTS (SELECT 1 FROM live)
         ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence,
             written_at_ms = EXCLUDED.written_at_ms,
             quiet_until_ms = COALESCE(EXCLUDED.quiet_until_ms, distlock_note.quiet_until_ms)
         RETURNING written_at_ms"
    ))
    .bind(name)
    .bind(token)
    .bind(value)
    .bind(i64::try_from(fencing_token).unwrap_or(i64::MAX))
    .bind(quiet_ms(quiet_for))
    .fetch_optional(pool)
    .await
    .map_err(db_error("write_note"))?;
    match written {
        Some(at) => Ok(u64::try_from(at).ok()),
        None => Err(distlock_core::backend::note_refused(name)),
    }
}

/// `name`'s note, its quiet window measured by the server now.
pub(super) async fn read(pool: &PgPool, name: &str) -> Result<Option<Note>> {
    let row: Option<NoteRow> = sqlx::query_as(&format!(
        "SELECT value, fence, written_at_ms, COALESCE(quiet_until_ms - {CLOCK_MS}, 0)
         FROM distlock_note WHERE name = $1"
    ))
    .bind(name)
    .fetch_optional(pool)
    .await
    .map_err(db_error("read_note"))?;
    from_row(name, row)
}

/// Writes `name`'s note on `conn`, the connection holding session-mode advisory lock
/// `key`, if it still holds it: the server's time of the write, `None` if it does not.
pub(super) async fn write_held(
    conn: &mut PgConnection,
    key: i64,
    name: &str,
    note: &NoteWrite<'_>,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(&format!(
        "WITH now AS (SELECT {CLOCK_MS} AS ms)
         INSERT INTO distlock_note (name, value, fence, written_at_ms, quiet_until_ms)
         SELECT $1, $2, $3, now.ms, now.ms + $4::BIGINT FROM now
         WHERE EXISTS (
             SELECT 1 FROM pg_locks l
             WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory' AND l.objsubid = 1
               AND l.granted AND ((l.classid::BIGINT << 32) | l.objid::BIGINT) = $5
         )
         ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence,
             written_at_ms = EXCLUDED.written_at_ms,
             quiet_until_ms = COALESCE(EXCLUDED.quiet_until_ms, distlock_note.quiet_until_ms)
         RETURNING written_at_ms"
    ))
    .bind(name)
    .bind(note.value)
    .bind(note.fence)
    .bind(note.quiet_ms)
    .bind(key)
    .fetch_optional(conn)
    .await
}
