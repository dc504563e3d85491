//! Reading lease-table rows out of any dialect's result rows: every integer column is a
//! 64-bit integer (`fair` too, as 0 or 1) and every text column text, in each dialect.

use sqlx::{ColumnIndex, Decode, Row, Type};

use std::collections::BTreeMap;

use crate::lease_table::{HolderRow, LiveRows, WaiterRow};

/// A result row whose columns read as `i64` and `String`.
pub(crate) trait LeaseRow: Row
where
    usize: ColumnIndex<Self>,
{
    fn int(&self, at: usize) -> sqlx::Result<i64>;
    fn text(&self, at: usize) -> sqlx::Result<String>;
}

impl<R: Row> LeaseRow for R
where
    usize: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    fn int(&self, at: usize) -> sqlx::Result<i64> {
        self.try_get(at)
    }

    /// MySQL reports text compared byte for byte (`utf8mb4_bin`) as binary, so the column
    /// type is not checked; decoding still refuses bytes that are not UTF-8.
    fn text(&self, at: usize) -> sqlx::Result<String> {
        self.try_get_unchecked(at)
    }
}

pub(crate) const HOLDER_COLUMNS: &str =
    "token, owner, kind, lim, permits, fence, expires_at_ms, host, pid, acquired_at_ms";
pub(crate) const WAITER_COLUMNS: &str =
    "seq, token, owner, kind, lim, permits, fair, host, pid, since_ms, expires_at_ms";

/// Reads a holder whose columns start at column `at` (after any columns selected first).
pub(crate) fn holder<R: LeaseRow>(row: &R, at: usize) -> sqlx::Result<HolderRow>
where
    usize: ColumnIndex<R>,
{
    Ok(HolderRow {
        token: row.text(at)?,
        owner: row.text(at + 1)?,
        kind: row.text(at + 2)?,
        lim: row.int(at + 3)?,
        permits: row.int(at + 4)?,
        fence: row.int(at + 5)?,
        expires_at_ms: row.int(at + 6)?,
        host: row.text(at + 7)?,
        pid: row.int(at + 8)?,
        acquired_at_ms: row.int(at + 9)?,
    })
}

/// Reads a waiter whose columns start at column `at`.
pub(crate) fn waiter<R: LeaseRow>(row: &R, at: usize) -> sqlx::Result<WaiterRow>
where
    usize: ColumnIndex<R>,
{
    Ok(WaiterRow {
        seq: row.int(at)?,
        token: row.text(at + 1)?,
        owner: row.text(at + 2)?,
        kind: row.text(at + 3)?,
        lim: row.int(at + 4)?,
        permits: row.int(at + 5)?,
        fair: row.int(at + 6)? != 0,
        host: row.text(at + 7)?,
        pid: row.int(at + 8)?,
        since_ms: row.int(at + 9)?,
        expires_at_ms: row.int(at + 10)?,
    })
}

/// The status query of one table: `SELECT name, <columns>` of its live rows, by name then
/// `order`. `name_filter` picks one name or every name and `now` is the clock parameter,
/// each in the dialect's spelling.
pub(crate) fn live_select(
    table: &str,
    columns: &str,
    order: &str,
    name_filter: &str,
    now: &str,
) -> String {
    format!(
        "SELECT name, {columns} FROM {table}
         WHERE {name_filter} AND expires_at_ms > {now} ORDER BY name, {order}"
    )
}

/// Adds status rows to `live`: holders read by a `SELECT name, HOLDER_COLUMNS` and waiters
/// by a `SELECT name, WAITER_COLUMNS`.
pub(crate) fn add_live<R: LeaseRow>(
    live: &mut LiveRows,
    holders: &[R],
    waiters: &[R],
) -> sqlx::Result<()>
where
    usize: ColumnIndex<R>,
{
    for row in holders {
        live.holder(row.text(0)?, holder(row, 1)?);
    }
    for row in waiters {
        live.waiter(row.text(0)?, waiter(row, 1)?);
    }
    Ok(())
}

/// The fencing counters read by a `SELECT name, value`.
pub(crate) fn name_values<R: LeaseRow>(rows: &[R]) -> sqlx::Result<BTreeMap<String, i64>>
where
    usize: ColumnIndex<R>,
{
    rows.iter()
        .map(|row| Ok((row.text(0)?, row.int(1)?)))
        .collect()
}
