//! Reading lease-table rows out of SQLite result rows.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::lease_table::{HolderRow, WaiterRow};

pub(super) const HOLDER_COLUMNS: &str =
    "token, owner, kind, lim, permits, fence, expires_at_ms, host, pid, acquired_at_ms";
pub(super) const WAITER_COLUMNS: &str =
    "seq, token, owner, kind, lim, permits, fair, host, pid, since_ms, expires_at_ms";

/// Reads a holder whose columns start at column `at` (after any columns selected first).
pub(super) fn holder(row: &SqliteRow, at: usize) -> sqlx::Result<HolderRow> {
    Ok(HolderRow {
        token: row.try_get(at)?,
        owner: row.try_get(at + 1)?,
        kind: row.try_get(at + 2)?,
        lim: row.try_get(at + 3)?,
        permits: row.try_get(at + 4)?,
        fence: row.try_get(at + 5)?,
        expires_at_ms: row.try_get(at + 6)?,
        host: row.try_get(at + 7)?,
        pid: row.try_get(at + 8)?,
        acquired_at_ms: row.try_get(at + 9)?,
    })
}

/// Reads a waiter whose columns start at column `at`.
pub(super) fn waiter(row: &SqliteRow, at: usize) -> sqlx::Result<WaiterRow> {
    Ok(WaiterRow {
        seq: row.try_get(at)?,
        token: row.try_get(at + 1)?,
        owner: row.try_get(at + 2)?,
        kind: row.try_get(at + 3)?,
        lim: row.try_get(at + 4)?,
        permits: row.try_get(at + 5)?,
        fair: row.try_get::<i64, _>(at + 6)? != 0,
        host: row.try_get(at + 7)?,
        pid: row.try_get(at + 8)?,
        since_ms: row.try_get(at + 9)?,
        expires_at_ms: row.try_get(at + 10)?,
    })
}
