//! Reading lease-table rows out of any dialect's result rows: every integer column is a
//! 64-bit integer (`fair` too, as 0 or 1) and every text column text, in each dialect.

use distlock_core::backend::LockRequest;
use sqlx::{ColumnIndex, Database, Decode, Encode, Row, Type};

use crate::lease_table::{HolderRow, LiveRows, WAITER_LEASE, WaiterRow, millis};

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
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn name_values<R: LeaseRow>(
    rows: &[R],
) -> sqlx::Result<std::collections::BTreeMap<String, i64>>
where
    usize: ColumnIndex<R>,
{
    rows.iter()
        .map(|row| Ok((row.text(0)?, row.int(1)?)))
        .collect()
}

/// A statement of dialect `DB` with its parameters.
pub(crate) type Stmt<'q, DB> = sqlx::query::Query<'q, DB, <DB as Database>::Arguments<'q>>;

/// Binds the columns every lease-table insert starts with: token, name, owner, kind, lim,
/// permits.
pub(crate) fn bind_claim<'q, DB>(query: Stmt<'q, DB>, request: &'q LockRequest) -> Stmt<'q, DB>
where
    DB: Database,
    &'q str: Encode<'q, DB> + Type<DB>,
    i64: Encode<'q, DB> + Type<DB>,
{
    query
        .bind(request.token.as_str())
        .bind(request.name.as_str())
        .bind(request.owner.as_str())
        .bind(request.kind.as_str())
        .bind(i64::from(request.kind.limit()))
        .bind(i64::from(request.permits))
}

/// Binds what a grant row holds after its claim (and fence, where the dialect passes one):
/// expiry (`now` plus the TTL), host, pid, grant time `now`.
pub(crate) fn bind_grant_meta<'q, DB>(
    query: Stmt<'q, DB>,
    request: &'q LockRequest,
    now: i64,
) -> Stmt<'q, DB>
where
    DB: Database,
    &'q str: Encode<'q, DB> + Type<DB>,
    i64: Encode<'q, DB> + Type<DB>,
{
    query
        .bind(now.saturating_add(millis(request.ttl)))
        .bind(request.meta.host.as_str())
        .bind(i64::from(request.meta.pid))
        .bind(now)
}

/// Binds a waiter row: its claim, then fair, expiry (`now` plus [`WAITER_LEASE`]), host,
/// pid, arrival `now`, and the wake-up address of its client.
pub(crate) fn bind_waiter<'q, DB>(
    query: Stmt<'q, DB>,
    request: &'q LockRequest,
    now: i64,
    wake: &'q str,
) -> Stmt<'q, DB>
where
    DB: Database,
    &'q str: Encode<'q, DB> + Type<DB>,
    i64: Encode<'q, DB> + Type<DB>,
{
    bind_claim(query, request)
        .bind(i64::from(request.fair))
        .bind(now.saturating_add(millis(WAITER_LEASE)))
        .bind(request.meta.host.as_str())
        .bind(i64::from(request.meta.pid))
        .bind(now)
        .bind(wake)
}

/// `?, ?, …`: the marks of `count` binds, for an `IN (…)` list of the dialects that mark
/// binds with `?`.
#[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
pub(crate) fn bind_marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}
