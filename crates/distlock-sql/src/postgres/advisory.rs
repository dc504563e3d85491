//! Every SQL statement of PostgreSQL's session mode, and the map from lock names to
//! advisory-lock keys. Each statement runs on the lock's own connection; the backend's
//! session bookkeeping lives in [`super::sessions`].

use distlock_core::backend::LockRequest;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, Row};

use super::{CLOCK_MS, FIRST_FENCE, NEXT_FENCE};
use crate::lease_table::{HolderRow, LiveRows, WaiterRow, millis};
use crate::session::Tried;

/// Joins a session's row `s` to `l`, its session's entry in `pg_locks` for the row's key
/// (held or waited for) in this database.
const LOCKED: &str = "l.locktype = 'advisory' AND l.objsubid = 1 AND l.pid = s.backend_pid
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ((l.classid::BIGINT << 32) | l.objid::BIGINT) = s.key";

/// Makes an insert of a session's row overwrite the row it had before: one row per
/// session, updated in place.
const RECORD: &str = "ON CONFLICT (backend_pid) DO UPDATE SET token = EXCLUDED.token,
    key = EXCLUDED.key, name = EXCLUDED.name, owner = EXCLUDED.owner, kind = EXCLUDED.kind,
    fair = EXCLUDED.fair, fence = EXCLUDED.fence, host = EXCLUDED.host, pid = EXCLUDED.pid,
    since_ms = EXCLUDED.since_ms, ttl_ms = EXCLUDED.ttl_ms";

/// The advisory-lock key of a lock name: the first eight bytes of the SHA-256 digest of
/// the name's UTF-8 bytes, read as a big-endian signed 64-bit integer.
///
/// The same key in SQL, for tools that want to see or take a distlock lock:
/// `('x' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 16))::bit(64)::bigint`.
///
/// Two names could share a key (about one pair in 2^32 among 2^32 names); they then
/// exclude each other, which is safe, and the backend reports it.
///
/// # Examples
///
/// ```
/// use distlock_sql::postgres::advisory_key;
/// assert_eq!(advisory_key("orders"), advisory_key("orders"));
/// assert_ne!(advisory_key("orders"), advisory_key("invoices"));
/// ```
pub fn advisory_key(name: &str) -> i64 {
    let digest = Sha256::digest(name.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Shared (read) or exclusive (mutex, write) advisory locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    Exclusive,
    Shared,
}

impl Share {
    pub(super) fn of(request: &LockRequest) -> Share {
        match request.kind.is_exclusive() {
            true => Share::Exclusive,
            false => Share::Shared,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Share::Exclusive => "",
            Share::Shared => "_shared",
        }
    }
}

/// Whether a live session (holding or waiting) uses `name` as a mutex or read/write lock.
pub(super) async fn in_session_use(conn: &mut PgConnection, name: &str) -> sqlx::Result<bool> {
    sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT 1 FROM distlock_session s JOIN pg_locks l ON {LOCKED}
           WHERE s.key = $1 AND s.name = $2)"
    ))
    .bind(advisory_key(name))
    .bind(name)
    .fetch_one(conn)
    .await
}

/// The `idle_session_timeout` that ends a holder's session when its renewals stop for a
/// TTL: what makes a paused or partitioned holder's lock come back.
pub(super) fn idle_limit(request_ttl: std::time::Duration) -> String {
    millis(request_ttl)
        .clamp(1, i64::from(i32::MAX))
        .to_string()
}

/// Tries to take the lock without waiting; if taken, mints the fencing token, records the
/// holder, and arms the session's idle limit — all in one statement.
pub(super) async fn try_lock(
    conn: &mut PgConnection,
    request: &LockRequest,
    key: i64,
) -> sqlx::Result<Tried> {
    let share = Share::of(request);
    let sql = format!(
        "WITH clash AS MATERIALIZED (
           SELECT EXISTS (SELECT 1 FROM distlock_lease WHERE name = $2
                          AND kind = 'semaphore' AND expires_at_ms > {CLOCK_MS}) AS semaphore
         ),
         got AS MATERIALIZED (
           SELECT 1 FROM clash
           WHERE CASE WHEN semaphore THEN FALSE ELSE pg_try_advisory_lock{suffix}($1) END
         ),
         fence AS (
           INSERT INTO distlock_fence (name, value) SELECT $2, {FIRST_FENCE} FROM got
           ON CONFLICT (name) DO UPDATE SET value = {NEXT_FENCE} RETURNING value
         ),
         held AS (
           INSERT INTO distlock_session
             (backend_pid, token, key, name, owner, kind, fair, fence, host, pid, since_ms, ttl_ms)
           SELECT pg_backend_pid(), $3, $1, $2, $4, $5, $6, fence.value, $7, $8, {CLOCK_MS}, $9
           FROM fence {RECORD} RETURNING 1
         ),
         idle AS MATERIALIZED (
           SELECT set_config('idle_session_timeout', $10, false) FROM got
         )
         SELECT (SELECT value FROM fence), pg_backend_pid(),
                (SELECT COUNT(*) FROM idle) + (SELECT COUNT(*) FROM held),
                ARRAY(SELECT DISTINCT name FROM distlock_session WHERE key = $1 AND name <> $2),
                (SELECT semaphore FROM clash)",
        suffix = share.suffix(),
    );
    let row = bind_holder(sqlx::query(&sql), request, key)
        .bind(idle_limit(request.ttl))
        .fetch_one(conn)
        .await?;
    let semaphore: bool = row.try_get(4)?;
    Ok(Tried {
        fence: row.try_get(0)?,
        conn_id: i64::from(row.try_get::<i32, _>(1)?),
        others: row.try_get(3)?,
        clash: semaphore.then_some("a semaphore"),
    })
}

/// Records a waiter (purging rows of sessions that ended), so `status` can show it.
pub(super) async fn queue(
    conn: &mut PgConnection,
    request: &LockRequest,
    key: i64,
) -> sqlx::Result<()> {
    let sql = format!(
        "WITH purged AS (
           DELETE FROM distlock_session s WHERE s.key = $1
             AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.backend_pid)
         )
         INSERT INTO distlock_session
           (backend_pid, token, key, name, owner, kind, fair, fence, host, pid, since_ms, ttl_ms)
         VALUES (pg_backend_pid(), $3, $1, $2, $4, $5, $6, NULL, $7, $8, {CLOCK_MS}, $9)
         {RECORD}"
    );
    bind_holder(sqlx::query(&sql), request, key)
        .execute(conn)
        .await?;
    Ok(())
}

/// Waits in the server's lock queue until granted. The statement touches no table, so a
/// long wait holds up nobody else's statements (not even schema checks). Cancelled with
/// `pg_cancel_backend` from another connection.
pub(super) async fn wait(conn: &mut PgConnection, share: Share, key: i64) -> sqlx::Result<()> {
    sqlx::query(&format!("SELECT pg_advisory_lock{}($1)", share.suffix()))
        .bind(key)
        .execute(conn)
        .await?;
    Ok(())
}

/// After a wait: mints the fencing token, marks the waiter row as the holder and arms the
/// idle limit, in one statement.
pub(super) async fn granted(conn: &mut PgConnection, request: &LockRequest) -> sqlx::Result<i64> {
    let sql = format!(
        "WITH fence AS (
           INSERT INTO distlock_fence (name, value) VALUES ($1, {FIRST_FENCE})
           ON CONFLICT (name) DO UPDATE SET value = {NEXT_FENCE} RETURNING value
         ),
         held AS (
           UPDATE distlock_session SET fence = fence.value, since_ms = {CLOCK_MS}
           FROM fence WHERE backend_pid = pg_backend_pid() AND token = $2 RETURNING 1
         )
         SELECT (SELECT value FROM fence), set_config('idle_session_timeout', $3, false),
                (SELECT COUNT(*) FROM held)"
    );
    sqlx::query(&sql)
        .bind(&request.name)
        .bind(&request.token)
        .bind(idle_limit(request.ttl))
        .fetch_one(conn)
        .await?
        .try_get(0)
}

/// Shows the session is alive and re-arms its idle limit: the renewal of a session lock.
pub(super) async fn renew(conn: &mut PgConnection, idle: &str) -> sqlx::Result<()> {
    sqlx::query("SELECT set_config('idle_session_timeout', $1, false)")
        .bind(idle)
        .execute(conn)
        .await?;
    Ok(())
}

/// Releases the lock and disarms the idle limit; whether the session still held the lock.
/// The session's row stays (status shows only rows whose lock is held or waited for) and
/// is overwritten by the session's next lock: no row is inserted or deleted per lock.
pub(super) async fn unlock(conn: &mut PgConnection, share: Share, key: i64) -> sqlx::Result<bool> {
    let sql = format!(
        "SELECT pg_advisory_unlock{}($1), set_config('idle_session_timeout', '0', false)",
        share.suffix()
    );
    sqlx::query(&sql)
        .bind(key)
        .fetch_one(conn)
        .await?
        .try_get(0)
}

/// Binds `$1` key, `$2` name, `$3` token, `$4` owner, `$5` kind, `$6` fair, `$7` host,
/// `$8` pid, `$9` TTL in ms.
fn bind_holder<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    request: &'q LockRequest,
    key: i64,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(key)
        .bind(&request.name)
        .bind(&request.token)
        .bind(request.owner.as_str())
        .bind(request.kind.as_str())
        .bind(i64::from(request.fair))
        .bind(&request.meta.host)
        .bind(i64::from(request.meta.pid))
        .bind(millis(request.ttl))
}

/// Adds the session locks' live holders and waiters of one name (or of all) to `live`: the
/// recorded rows whose session holds, or waits for, the advisory lock right now.
pub(super) async fn live_sessions(
    conn: &mut PgConnection,
    name: Option<&str>,
    now: i64,
    live: &mut LiveRows,
) -> sqlx::Result<()> {
    let rows = sqlx::query(&format!(
        "SELECT s.name, s.token, s.owner, s.kind, COALESCE(s.fence, 0), s.host, s.pid,
                s.since_ms, s.ttl_ms, s.fair, l.granted
         FROM distlock_session s JOIN pg_locks l ON {LOCKED}
         WHERE ($1::TEXT IS NULL OR s.name = $1) AND l.granted = (s.fence IS NOT NULL)
         ORDER BY s.name, s.since_ms"
    ))
    .bind(name)
    .fetch_all(conn)
    .await?;
    for row in rows {
        let since_ms: i64 = row.try_get(7)?;
        let expires_at_ms = now.saturating_add(row.try_get(8)?);
        let (name, token, owner, kind) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        let (host, pid) = (row.try_get(5)?, row.try_get(6)?);
        match row.try_get::<bool, _>(10)? {
            true => live.holder(
                name,
                HolderRow {
                    token,
                    owner,
                    kind,
                    lim: 1,
                    permits: 1,
                    fence: row.try_get(4)?,
                    expires_at_ms,
                    host,
                    pid,
                    acquired_at_ms: since_ms,
                },
            ),
            false => live.waiter(
                name,
                WaiterRow {
                    seq: since_ms,
                    token,
                    owner,
                    kind,
                    lim: 1,
                    permits: 1,
                    fair: row.try_get::<i64, _>(9)? != 0,
                    host,
                    pid,
                    since_ms,
                    expires_at_ms,
                },
            ),
        }
    }
    Ok(())
}
