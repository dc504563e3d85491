//! Every SQL statement of PostgreSQL's lease mode, as functions over the pool. Each runs to
//! the end once started (the backend runs them on their own tasks), so a caller that gives
//! up never leaves a transaction half done. Time is the database's: every transaction
//! reads `clock_timestamp()` once and decides by it, so clients' clocks do not matter.

use std::sync::LazyLock;
use std::time::Duration;

use distlock_core::backend::{LockRequest, PollOutcome};
use distlock_core::{Error, HolderInfo, LockKind, LockState, Result};
use sqlx::{PgConnection, PgPool, Postgres, Row};

use super::notes;
use super::{CLOCK_MS, FIRST_FENCE, NEXT_FENCE, advisory, db_error};
use crate::fences;
use crate::lease_engine::{self, LeaseDialect, Locked, Wake};
use crate::lease_table::{HolderRow, LiveRows, WaiterRow, millis};
use crate::rows::{
    HOLDER_COLUMNS, WAITER_COLUMNS, add_live, bind_claim, bind_grant_meta, bind_waiter, holder,
    live_select, name_values, waiter,
};

const SCHEMA: &str = include_str!("schema.sql");

/// The first key of the transaction-level advisory locks that serialise changes to one
/// name (the second is the name's `hashtext`). The two-key space never overlaps the
/// single-key space that session-mode locks use.
const LOCK_CLASS: i32 = 0x646c_6b00;

/// The tables and indexes [`SCHEMA`] creates.
const SCHEMA_OBJECTS: [&str; 9] = [
    "distlock_fence",
    "distlock_sweep",
    "distlock_note",
    "distlock_lease",
    "distlock_lease_by_name",
    "distlock_waiter",
    "distlock_waiter_by_name",
    "distlock_session",
    "distlock_session_by_key",
];

/// Creates the tables if they are missing (one client at a time). When they all exist,
/// nothing is locked (`CREATE INDEX IF NOT EXISTS` would wait for every statement then
/// writing to the table), and the rows of ended sessions go.
pub(super) async fn prepare(pool: &PgPool) -> Result<()> {
    let err = db_error("connect");
    let (missing, others): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE o NOT IN ('distlock_sweep', 'distlock_note'))
         FROM unnest($1::TEXT[]) AS o WHERE to_regclass(o) IS NULL",
    )
    .bind(SCHEMA_OBJECTS)
    .fetch_one(pool)
    .await
    .map_err(&err)?;
    if others == 0 {
        if missing > 0 {
            make_later_tables(pool).await;
        }
        return purge_dead_sessions(pool).await;
    }
    let mut tx = pool.begin().await.map_err(&err)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
        .bind(LOCK_CLASS)
        .execute(&mut *tx)
        .await
        .map_err(&err)?;
    let statements = SCHEMA.split(';').map(str::trim).filter(|s| !s.is_empty());
    let later = fences::SWEEP_TABLE.into_iter().chain([notes::NOTE_TABLE]);
    for statement in statements.chain(later) {
        sqlx::query(statement)
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
    }
    tx.commit().await.map_err(&err)
}

/// Makes the sweep and note tables, the objects a database made by an older distlock
/// lacks, each under the schema lock; a failure (a user who may not create tables) is
/// logged, not returned.
async fn make_later_tables(pool: &PgPool) {
    if let Err(err) = under_schema_lock(pool, &fences::SWEEP_TABLE).await {
        crate::mode::sweep_table_refused("postgres", &err);
    }
    if let Err(err) = under_schema_lock(pool, &[notes::NOTE_TABLE]).await {
        crate::mode::note_table_refused("postgres", notes::NOTE_TABLE, &err);
    }
}

/// Runs `statements` in one transaction under the schema lock.
async fn under_schema_lock(pool: &PgPool, statements: &[&str]) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
        .bind(LOCK_CLASS)
        .execute(&mut *tx)
        .await?;
    for statement in statements {
        sqlx::query(statement).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Deletes the session-mode rows of sessions that ended (each session keeps one row, so
/// without this they would pile up as connections come and go).
async fn purge_dead_sessions(pool: &PgPool) -> Result<()> {
    sqlx::query(
        "DELETE FROM distlock_session s
         WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.backend_pid)",
    )
    .execute(pool)
    .await
    .map_err(db_error("connect"))?;
    Ok(())
}

/// Mints the next fencing token, writes the grant and leaves the queue (binds: token,
/// name, the claim, then the grant's metadata); built once, not on every grant.
static GRANT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH fence AS (
           INSERT INTO distlock_fence (name, value) VALUES ($2, {FIRST_FENCE})
           ON CONFLICT (name) DO UPDATE SET value = {NEXT_FENCE} RETURNING value
         ),
         dequeued AS (DELETE FROM distlock_waiter WHERE token = $1)
         INSERT INTO distlock_lease
           (token, name, owner, kind, lim, permits, fence, expires_at_ms, host, pid, acquired_at_ms)
         SELECT $1, $2, $3, $4, $5, $6, fence.value, $7, $8, $9, $10 FROM fence
         RETURNING fence"
    )
});

/// Takes the name's transaction lock and reads the database's clock.
async fn lock_name(conn: &mut PgConnection, name: &str) -> sqlx::Result<i64> {
    sqlx::query(&format!(
        "SELECT {CLOCK_MS} FROM (SELECT pg_advisory_xact_lock($1, hashtext($2))) AS locked"
    ))
    .bind(LOCK_CLASS)
    .bind(name)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)
}

/// [`lock_name`], and in the same round trip deletes the name's expired grants and queue
/// rows; the clock and how many rows went. (The statement's snapshot predates the lock, so
/// a row committed just before it may survive until the next purge; rows are read again
/// by later statements, which see everything.)
async fn lock_name_and_purge(conn: &mut PgConnection, name: &str) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query(&format!(
        "WITH clock AS (
           SELECT {CLOCK_MS} AS now FROM (SELECT pg_advisory_xact_lock($1, hashtext($2))) AS locked
         ),
         leases AS (
           DELETE FROM distlock_lease
           WHERE name = $2 AND expires_at_ms <= (SELECT now FROM clock) RETURNING 1
         ),
         waiters AS (
           DELETE FROM distlock_waiter
           WHERE name = $2 AND expires_at_ms <= (SELECT now FROM clock) RETURNING 1
         )
         SELECT (SELECT now FROM clock),
                (SELECT COUNT(*) FROM leases) + (SELECT COUNT(*) FROM waiters)"
    ))
    .bind(LOCK_CLASS)
    .bind(name)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// PostgreSQL's steps of the lease-table engine: a transaction-level advisory lock per
/// name, the database's clock, and a `NOTIFY` to the head waiter's client, delivered when
/// the transaction commits.
struct PgLeases;

#[async_trait::async_trait]
impl LeaseDialect for PgLeases {
    type DB = Postgres;

    fn error(operation: &'static str, err: sqlx::Error) -> Error {
        db_error(operation)(err)
    }

    fn pushed(&self, _channel: &str) -> bool {
        true
    }

    async fn lock(&self, conn: &mut PgConnection, name: &str, purge: bool) -> sqlx::Result<Locked> {
        let (now, purged) = match purge {
            true => lock_name_and_purge(conn, name).await?,
            false => (lock_name(conn, name).await?, 0),
        };
        Ok(Locked {
            now,
            purged: u64::try_from(purged).unwrap_or(0),
            session_held: false,
        })
    }

    /// A semaphore is refused on a name a session-mode lock uses, in either mode.
    async fn refuse(
        &self,
        conn: &mut PgConnection,
        request: &LockRequest,
        _: &Locked,
    ) -> Result<()> {
        let semaphore = matches!(request.kind, LockKind::Semaphore { .. });
        if semaphore
            && advisory::in_session_use(conn, &request.name)
                .await
                .map_err(db_error("acquire"))?
        {
            return Err(crate::session::kind_clash(
                &request.name,
                "a mutex or read/write lock",
            ));
        }
        Ok(())
    }

    async fn live_rows(
        &self,
        conn: &mut PgConnection,
        name: &str,
    ) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)> {
        let holders = sqlx::query(&format!(
            "SELECT {HOLDER_COLUMNS} FROM distlock_lease WHERE name = $1 ORDER BY fence"
        ))
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| holder(row, 0))
        .collect::<sqlx::Result<_>>()?;
        let waiters = sqlx::query(&format!(
            "SELECT {WAITER_COLUMNS} FROM distlock_waiter WHERE name = $1 ORDER BY seq"
        ))
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| waiter(row, 0))
        .collect::<sqlx::Result<_>>()?;
        Ok((holders, waiters))
    }

    /// Mints the next fencing token, writes the grant and leaves the queue, in one statement.
    async fn grant(
        &self,
        conn: &mut PgConnection,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<i64> {
        let insert = sqlx::query(&GRANT);
        bind_grant_meta(bind_claim(insert, request), request, now)
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)
    }

    async fn keep_queued(
        &self,
        conn: &mut PgConnection,
        request: &LockRequest,
        now: i64,
        channel: &str,
    ) -> sqlx::Result<()> {
        let insert = sqlx::query(
            "INSERT INTO distlock_waiter
               (token, name, owner, kind, lim, permits, fair, expires_at_ms, host, pid, since_ms, wake)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (token) DO UPDATE SET expires_at_ms = EXCLUDED.expires_at_ms",
        );
        bind_waiter(insert, request, now, channel)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Notifies the live waiter at the head of `name`'s queue on its client's channel
    /// (delivered when the transaction commits): nothing for the caller to wake.
    async fn wake_next(
        &self,
        conn: &mut PgConnection,
        name: &str,
        now: i64,
    ) -> sqlx::Result<Option<Wake>> {
        sqlx::query(
            "SELECT pg_notify(wake, token) FROM distlock_waiter
             WHERE name = $1 AND expires_at_ms > $2 ORDER BY seq LIMIT 1",
        )
        .bind(name)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        Ok(None)
    }

    async fn delete_request(&self, conn: &mut PgConnection, token: &str) -> sqlx::Result<u64> {
        let mut removed = 0;
        for table in ["distlock_waiter", "distlock_lease"] {
            removed += sqlx::query(&format!("DELETE FROM {table} WHERE token = $1"))
                .bind(token)
                .execute(&mut *conn)
                .await?
                .rows_affected();
        }
        Ok(removed)
    }

    async fn delete_grant(
        &self,
        conn: &mut PgConnection,
        token: &str,
    ) -> sqlx::Result<Option<i64>> {
        sqlx::query("DELETE FROM distlock_lease WHERE token = $1 RETURNING expires_at_ms")
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?
            .map(|row| row.try_get(0))
            .transpose()
    }

    async fn bump_fence(&self, conn: &mut PgConnection, name: &str) -> sqlx::Result<()> {
        sqlx::query(&format!(
            "INSERT INTO distlock_fence (name, value) VALUES ($1, {FIRST_FENCE})
             ON CONFLICT (name) DO UPDATE SET value = {NEXT_FENCE}"
        ))
        .bind(name)
        .execute(&mut *conn)
        .await
        .map(drop)
    }
}

/// Decides a request (see [`lease_engine::poll`]), queuing it with `channel` as its
/// wake-up channel.
pub(super) async fn poll(
    pool: &PgPool,
    request: &LockRequest,
    channel: &str,
) -> Result<PollOutcome> {
    Ok(lease_engine::poll(&PgLeases, pool, request, channel)
        .await?
        .outcome)
}

/// Deletes the queue row and any grant made under `token`, waking the next waiter if
/// anything went.
pub(super) async fn cancel(pool: &PgPool, name: &str, token: &str) -> Result<()> {
    lease_engine::cancel(&PgLeases, pool, name, token)
        .await
        .map(drop)
}

/// Extends each unexpired grant under `tokens` to `ttl` from the database's now, in one
/// statement; whether each was renewed, in order.
pub(super) async fn renew(pool: &PgPool, tokens: &[String], ttl: Duration) -> Result<Vec<bool>> {
    let err = db_error("renew");
    let renewed: Vec<String> = sqlx::query(&format!(
        "UPDATE distlock_lease SET expires_at_ms = {CLOCK_MS} + $2
         WHERE token = ANY($1) AND expires_at_ms > {CLOCK_MS} RETURNING token"
    ))
    .bind(tokens)
    .bind(millis(ttl))
    .fetch_all(pool)
    .await
    .map_err(&err)?
    .iter()
    .map(|row| row.try_get(0))
    .collect::<sqlx::Result<_>>()
    .map_err(&err)?;
    Ok(tokens.iter().map(|t| renewed.contains(t)).collect())
}

/// Deletes the grant under `token` and wakes the next waiter; whether the grant was there
/// and still valid.
pub(super) async fn release(pool: &PgPool, name: &str, token: &str) -> Result<bool> {
    Ok(lease_engine::release(&PgLeases, pool, name, token)
        .await?
        .was_held)
}

/// Breaks `name`'s grant with `fencing_token` (every grant: `None`), the counter bumped
/// first; the grants broken. The head waiter is notified on commit.
pub(super) async fn force_release(
    pool: &PgPool,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<Vec<HolderInfo>> {
    Ok(
        lease_engine::force_release(&PgLeases, pool, name, fencing_token)
            .await?
            .holders,
    )
}

/// Takes over the grant `handed` with `fencing_token` for `request` (see
/// [`lease_engine::adopt`]).
pub(super) async fn adopt(
    pool: &PgPool,
    handed: &str,
    fencing_token: u64,
    request: &LockRequest,
) -> Result<Option<u64>> {
    lease_engine::adopt(&PgLeases, pool, handed, fencing_token, request).await
}

/// The server processes of this database holding `name`'s session-mode advisory lock (a
/// 64-bit key shows in `pg_locks` as its high and low halves, `objsubid` 1); with
/// `fencing_token`, only the one whose grant has that token.
pub(super) async fn advisory_holders(
    pool: &PgPool,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<Vec<i32>> {
    sqlx::query_scalar(
        "SELECT DISTINCT l.pid FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND ((l.classid::BIGINT << 32) | l.objid::BIGINT) = $1
           AND ($2::BIGINT IS NULL OR l.pid IN
                (SELECT backend_pid FROM distlock_session WHERE name = $3 AND fence = $2))
         ORDER BY l.pid",
    )
    .bind(advisory::advisory_key(name))
    .bind(fencing_token.and_then(|t| i64::try_from(t).ok()))
    .bind(name)
    .fetch_all(pool)
    .await
    .map_err(db_error("force_release"))
}

/// The live holders and waiters of one name, or of every name with any; with `sessions`,
/// session-mode locks too.
pub(super) async fn inspect(
    pool: &PgPool,
    name: Option<&str>,
    sessions: bool,
) -> Result<Vec<LockState>> {
    let err = db_error("inspect");
    let mut snapshot = pool.begin().await.map_err(&err)?;
    let now: i64 = sqlx::query(&format!("SELECT {CLOCK_MS}"))
        .fetch_one(&mut *snapshot)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(&err)?;
    let (filter, clock) = ("($1::TEXT IS NULL OR name = $1)", "$2");
    let holders = live_select("distlock_lease", HOLDER_COLUMNS, "fence", filter, clock);
    let waiters = live_select("distlock_waiter", WAITER_COLUMNS, "seq", filter, clock);
    let mut rows = Vec::new();
    for select in [holders, waiters] {
        rows.push(
            sqlx::query(&select)
                .bind(name)
                .bind(now)
                .fetch_all(&mut *snapshot)
                .await
                .map_err(&err)?,
        );
    }
    let mut live = LiveRows::new(name);
    add_live(&mut live, &rows[0], &rows[1]).map_err(&err)?;
    if sessions {
        advisory::live_sessions(&mut snapshot, name, now, &mut live)
            .await
            .map_err(&err)?;
    }
    let fences = sqlx::query("SELECT name, value FROM distlock_fence WHERE name = ANY($1)")
        .bind(live.names())
        .fetch_all(&mut *snapshot)
        .await
        .and_then(|rows| name_values(&rows))
        .map_err(&err)?;
    snapshot.commit().await.map_err(&err)?;
    live.into_states(&fences, now)
}

/// One `SELECT 1` round trip on a pooled connection: the floor of every lock operation.
pub(super) async fn floor_round(pool: &PgPool) -> Result<()> {
    sqlx::query("SELECT 1")
        .execute(pool)
        .await
        .map_err(db_error("floor"))?;
    Ok(())
}
