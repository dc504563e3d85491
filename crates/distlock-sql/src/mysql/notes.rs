//! Each lock's note (a job's run record) in `distlock_note`, written under a live grant
//! and stamped with the server's clock: a lease's row locked against a concurrent release
//! or break until the write commits; a session lock's note written on its own connection
//! while it holds the lock.

use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::Note;
use sqlx::MySqlPool;
use sqlx::mysql::MySqlConnection;

use super::{CLOCK_MS, db_error, lock_key};
use crate::notes::{NoteRow, from_row, quiet_ms};
use crate::session::NoteWrite;

/// The note table, made apart from the other tables (a database made by an older
/// distlock lacks it).
pub(super) const NOTE_TABLE: &str = "CREATE TABLE IF NOT EXISTS distlock_note (
    lock_key       VARBINARY(256) NOT NULL PRIMARY KEY,
    name           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    value          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fence          BIGINT NOT NULL,
    written_at_ms  BIGINT NOT NULL,
    quiet_until_ms BIGINT NULL
) ENGINE = InnoDB";

/// The upsert of a note whose time of writing is bound.
const UPSERT: &str = "INSERT INTO distlock_note
         (lock_key, name, value, fence, written_at_ms, quiet_until_ms)
     VALUES (?, ?, ?, ?, ?, ? + ?)
     ON DUPLICATE KEY UPDATE name = VALUES(name), value = VALUES(value), fence = VALUES(fence),
         written_at_ms = VALUES(written_at_ms),
         quiet_until_ms = COALESCE(VALUES(quiet_until_ms), quiet_until_ms)";

/// Writes `name`'s note if the lease under `token` is live: the server's time of the
/// write.
pub(super) async fn write(
    pool: &MySqlPool,
    name: &str,
    token: &str,
    fencing_token: u64,
    value: &str,
    quiet_for: Option<Duration>,
) -> Result<Option<u64>> {
    let err = db_error("write_note");
    let mut tx = pool.begin().await.map_err(&err)?;
    let live: Option<(i64, i64)> = sqlx::query_as(&format!(
        "SELECT expires_at_ms, {CLOCK_MS} FROM distlock_lease
         WHERE token = ? AND lock_key = ? LOCK IN SHARE MODE"
    ))
    .bind(token)
    .bind(lock_key(name))
    .fetch_optional(&mut *tx)
    .await
    .map_err(&err)?;
    let now = match live {
        Some((expires, now)) if expires > now => now,
        _ => return Err(distlock_core::backend::note_refused(name)),
    };
    let note = NoteWrite {
        value,
        fence: i64::try_from(fencing_token).unwrap_or(i64::MAX),
        quiet_ms: quiet_ms(quiet_for),
    };
    upsert(&mut tx, name, &note, now).await.map_err(&err)?;
    tx.commit().await.map_err(&err)?;
    Ok(u64::try_from(now).ok())
}

/// Writes `name`'s note on `conn`, the connection holding session lock `key`, if it still
/// holds it: the server's time of the write, `None` if it does not.
pub(super) async fn write_held(
    conn: &mut MySqlConnection,
    key: &str,
    name: &str,
    note: &NoteWrite<'_>,
) -> sqlx::Result<Option<i64>> {
    let (mine, now): (Option<i64>, i64) = sqlx::query_as(&format!(
        "SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED), {CLOCK_MS}"
    ))
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    if mine != Some(1) {
        return Ok(None);
    }
    upsert(conn, name, note, now).await?;
    Ok(Some(now))
}

/// Upserts `name`'s note written at `now` on `conn`.
async fn upsert(
    conn: &mut MySqlConnection,
    name: &str,
    note: &NoteWrite<'_>,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(UPSERT)
        .bind(lock_key(name))
        .bind(name)
        .bind(note.value)
        .bind(note.fence)
        .bind(now)
        .bind(now)
        .bind(note.quiet_ms)
        .execute(conn)
        .await
        .map(drop)
}

/// `name`'s note, its quiet window measured by the server now.
pub(super) async fn read(pool: &MySqlPool, name: &str) -> Result<Option<Note>> {
    let row: Option<NoteRow> = sqlx::query_as(&format!(
        "SELECT CAST(value AS CHAR CHARACTER SET utf8mb4), fence, written_at_ms,
                COALESCE(quiet_until_ms - {CLOCK_MS}, 0)
         FROM distlock_note WHERE lock_key = ?"
    ))
    .bind(lock_key(name))
    .fetch_optional(pool)
    .await
    .map_err(db_error("read_note"))?;
    from_row(name, row)
}
