//! Every SQL statement of the SQLite backend, as functions over the pool. Each runs to the
//! end once started (the backend runs them on their own tasks), so a caller that gives up
//! never leaves a transaction half done on the connection.

use std::time::Duration;

use distlock_core::backend::{LockRequest, PollOutcome};
use distlock_core::{Error, LockState, Result};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection, SqlitePool};

use super::clock::LeaseClock;
use super::db_error;
use super::wake::Wake;
use crate::lease_engine::{self, Broken, LeaseDialect, Locked, Polled, Released};
use crate::lease_table::{HolderRow, LiveRows, WaiterRow, may_grant, millis, now_ms, retry_within};
use crate::rows::{
    HOLDER_COLUMNS, WAITER_COLUMNS, add_live, bind_claim, bind_grant_meta, bind_waiter, holder,
    live_select, name_values, waiter,
};

const SCHEMA: &str = include_str!("schema.sql");
/// The schema this code reads and writes, kept in `PRAGMA user_version`: 2 since fencing
/// tokens take the clock's floor and idle counters are deleted, so that a distlock that
/// counted from 1 refuses the database instead of seeding a deleted counter at 1 again; 3
/// since leases expire by the monotonic clock (see [`LeaseClock`]), so that a distlock
/// that expires them by the wall clock refuses to open it (one that has it open already
/// goes on until it opens it again).
const SCHEMA_VERSION: i64 = 3;

/// The tables and indexes a prepared database has.
const OBJECTS: [&str; 9] = [
    "distlock_fence",
    "distlock_note",
    "distlock_lease",
    "distlock_waiter",
    "distlock_floor",
    "distlock_clock",
    "distlock_sweep",
    "distlock_lease_by_name",
    "distlock_waiter_by_name",
];

/// Creates the tables, or brings an older database up to [`SCHEMA_VERSION`]; refuses a
/// database written by a newer distlock. The clock its leases expire by.
///
/// A database that needs no change is only read: a process stopped in the middle of a
/// write (SIGSTOP) holds SQLite's write lock until it runs again, and opening the database
/// meanwhile must not wait for it (a lock request then waits, within its deadline).
pub(super) async fn prepare(pool: &SqlitePool) -> Result<LeaseClock> {
    if let Some(clock) = prepared(pool).await? {
        return Ok(clock);
    }
    let err = db_error("connect");
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(&err)?;
    let version: i64 = sqlx::query("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(&err)?;
    if version > SCHEMA_VERSION {
        return Err(newer(version));
    }
    let statements = SCHEMA.split(';').map(str::trim).filter(|s| !s.is_empty());
    for statement in statements.chain(crate::fences::SWEEP_TABLE) {
        sqlx::query(statement)
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
    }
    if version < SCHEMA_VERSION {
        let has_wake: i64 = sqlx::query(
            "SELECT COUNT(*) FROM pragma_table_info('distlock_waiter') WHERE name = 'wake'",
        )
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(&err)?;
        if has_wake == 0 {
            sqlx::query("ALTER TABLE distlock_waiter ADD COLUMN wake TEXT NOT NULL DEFAULT ''")
                .execute(&mut *tx)
                .await
                .map_err(&err)?;
        }
        sqlx::query(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
    }
    let clock = LeaseClock::establish(&mut tx).await?;
    // A database with nothing in it has nothing to sweep: its first sweep is due a period
    // from now, not in the first process that opens it.
    sqlx::query(
        "UPDATE distlock_sweep SET last_us = ?1 WHERE id = 1 AND last_us = 0
           AND NOT EXISTS (SELECT 1 FROM distlock_fence)
           AND NOT EXISTS (SELECT 1 FROM distlock_lease)
           AND NOT EXISTS (SELECT 1 FROM distlock_waiter)",
    )
    .bind(now_ms().saturating_mul(1000))
    .execute(&mut *tx)
    .await
    .map_err(&err)?;
    tx.commit().await.map_err(&err)?;
    Ok(clock)
}

/// The lease clock of a database that needs no change (this distlock's schema, every
/// table and index, the one-row tables' rows, an anchor of this boot), read in a read
/// transaction; `None` if it needs one.
async fn prepared(pool: &SqlitePool) -> Result<Option<LeaseClock>> {
    let err = db_error("connect");
    let mut snapshot = pool.begin().await.map_err(&err)?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *snapshot)
        .await
        .map_err(&err)?;
    if version > SCHEMA_VERSION {
        return Err(newer(version));
    }
    let count = format!(
        "SELECT COUNT(*) FROM sqlite_master WHERE name IN ({})",
        crate::rows::bind_marks(OBJECTS.len())
    );
    let mut objects = sqlx::query_scalar(&count);
    for object in OBJECTS {
        objects = objects.bind(object);
    }
    let objects: i64 = objects.fetch_one(&mut *snapshot).await.map_err(&err)?;
    let rows: i64 = match version == SCHEMA_VERSION && objects == OBJECTS.len() as i64 {
        true => sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM distlock_floor WHERE id = 1)
                  + (SELECT COUNT(*) FROM distlock_sweep WHERE id = 1)",
        )
        .fetch_one(&mut *snapshot)
        .await
        .map_err(&err)?,
        false => 0,
    };
    let clock = match rows == 2 {
        true => LeaseClock::recorded(&mut snapshot).await?,
        false => None,
    };
    snapshot.commit().await.map_err(&err)?;
    Ok(clock)
}

/// The refusal of a database written by a newer distlock.
fn newer(version: i64) -> Error {
    Error::invalid(format!(
        "the lock database has schema version {version}, written by a newer distlock; this one knows up to {SCHEMA_VERSION}"
    ))
    .with_backend("sqlite")
    .with_operation("connect")
}

/// SQLite's steps of the lease-table engine: `BEGIN IMMEDIATE` takes the database's write
/// lock (the pool has one connection), time is the database's [`LeaseClock`] on this
/// machine, and a waiter is woken through the socket its process listens on.
struct SqliteLeases(LeaseClock);

#[async_trait::async_trait]
impl LeaseDialect for SqliteLeases {
    type DB = Sqlite;

    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    fn error(operation: &'static str, err: sqlx::Error) -> Error {
        db_error(operation)(err)
    }

    fn pushed(&self, socket: &str) -> bool {
        !socket.is_empty()
    }

    async fn lock(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        purge: bool,
    ) -> sqlx::Result<Locked> {
        let now = self.0.now_ms();
        let purged = match purge {
            true => purge_expired(conn, name, now).await?,
            false => 0,
        };
        Ok(Locked {
            now,
            purged,
            session_held: false,
        })
    }

    async fn live_rows(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
    ) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)> {
        live_rows(conn, name).await
    }

    async fn grant(
        &self,
        conn: &mut SqliteConnection,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<i64> {
        let fence: i64 = sqlx::query(
            "INSERT INTO distlock_fence (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = MAX(value + 1, ?2) RETURNING value",
        )
        .bind(&request.name)
        .bind(now_ms().saturating_mul(1000))
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
        let insert = sqlx::query(
            "INSERT INTO distlock_lease
               (token, name, owner, kind, lim, permits, fence, expires_at_ms, host, pid, acquired_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        );
        bind_grant_meta(bind_claim(insert, request).bind(fence), request, now)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM distlock_waiter WHERE token = ?1")
            .bind(&request.token)
            .execute(&mut *conn)
            .await?;
        Ok(fence)
    }

    async fn keep_queued(
        &self,
        conn: &mut SqliteConnection,
        request: &LockRequest,
        now: i64,
        socket: &str,
    ) -> sqlx::Result<()> {
        let insert = sqlx::query(
            "INSERT INTO distlock_waiter
               (token, name, owner, kind, lim, permits, fair, expires_at_ms, host, pid, since_ms, wake)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
             ON CONFLICT (token) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
        );
        bind_waiter(insert, request, now, socket)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// The live waiter at the head of `name`'s queue.
    async fn wake_next(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        now: i64,
    ) -> sqlx::Result<Option<Wake>> {
        let row = sqlx::query(
            "SELECT token, wake FROM distlock_waiter
             WHERE name = ?1 AND expires_at_ms > ?2 ORDER BY seq LIMIT 1",
        )
        .bind(name)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
        row.map(|row| {
            Ok(Wake {
                token: row.try_get(0)?,
                address: row.try_get(1)?,
            })
        })
        .transpose()
    }

    async fn delete_request(&self, conn: &mut SqliteConnection, token: &str) -> sqlx::Result<u64> {
        let mut removed = 0;
        for table in ["distlock_waiter", "distlock_lease"] {
            removed += sqlx::query(&format!("DELETE FROM {table} WHERE token = ?1"))
                .bind(token)
                .execute(&mut *conn)
                .await?
                .rows_affected();
        }
        Ok(removed)
    }

    async fn delete_grant(
        &self,
        conn: &mut SqliteConnection,
        token: &str,
    ) -> sqlx::Result<Option<i64>> {
        sqlx::query("DELETE FROM distlock_lease WHERE token = ?1 RETURNING expires_at_ms")
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?
            .map(|row| row.try_get(0))
            .transpose()
    }

    async fn bump_fence(&self, conn: &mut SqliteConnection, name: &str) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO distlock_fence (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = MAX(value + 1, ?2)",
        )
        .bind(name)
        .bind(now_ms().saturating_mul(1000))
        .execute(&mut *conn)
        .await
        .map(drop)
    }
}

/// Decides a request (see [`lease_engine::poll`]). A queued request whose row is `fresh`
/// first looks read-only (no write lock, no disk flush) and stops there if it surely
/// cannot be granted. `socket` is where this process listens for wake-ups, written into
/// the queue row.
pub(super) async fn poll(
    pool: &SqlitePool,
    clock: LeaseClock,
    request: &LockRequest,
    fresh: bool,
    socket: &str,
) -> Result<Polled> {
    if fresh && let Some(outcome) = peek(pool, clock, request, socket).await? {
        return Ok(Polled {
            outcome,
            wake: None,
        });
    }
    lease_engine::poll(&SqliteLeases(clock), pool, request, socket).await
}

/// What a queued request can tell read-only: `Some` (still waiting) when no row has expired
/// and it surely cannot be granted; `None` when the write path must decide.
async fn peek(
    pool: &SqlitePool,
    clock: LeaseClock,
    request: &LockRequest,
    socket: &str,
) -> Result<Option<PollOutcome>> {
    let err = db_error("acquire");
    let now = clock.now_ms();
    let mut snapshot = pool.begin().await.map_err(&err)?;
    let (holders, waiters) = live_rows(&mut snapshot, &request.name)
        .await
        .map_err(&err)?;
    snapshot.commit().await.map_err(&err)?;
    let expired = holders.iter().any(|h| h.expires_at_ms <= now)
        || waiters.iter().any(|w| w.expires_at_ms <= now);
    let queued = waiters.iter().any(|w| w.token == request.token);
    if expired || !queued || may_grant(&holders, &waiters, request, now)? {
        return Ok(None);
    }
    let pushed = SqliteLeases(clock).pushed(socket);
    Ok(Some(PollOutcome::pending(retry_within(
        &holders,
        &waiters,
        &request.token,
        now,
        pushed,
    ))))
}

/// Deletes the queue row and any grant made under `token`; if anything went, the waiter
/// to wake.
pub(super) async fn cancel(
    pool: &SqlitePool,
    clock: LeaseClock,
    name: &str,
    token: &str,
) -> Result<Option<Wake>> {
    lease_engine::cancel(&SqliteLeases(clock), pool, name, token).await
}

/// The most grants one renewal statement names (SQLite takes at most 32,766 parameters).
const RENEWED_AT_ONCE: usize = 5_000;

/// Extends each grant under `tokens` to `ttl` from now, if it has not expired; whether each
/// was renewed, in order. Each [`RENEWED_AT_ONCE`] grants are one `UPDATE` that commits by
/// itself: one flush to disk for all, and SQLite's write lock held only while it runs
/// (a process stopped in the middle holds it, and every other writer waits). A read that
/// takes no write lock then tells which were renewed: the grants live after the update
/// are exactly those it renewed (one it skipped had expired, and one released meanwhile
/// is gone, which is as good as not held).
pub(super) async fn renew(
    pool: &SqlitePool,
    clock: LeaseClock,
    tokens: &[String],
    ttl: Duration,
) -> Result<Vec<bool>> {
    let err = db_error("renew");
    let now = clock.now_ms();
    let mut renewed = std::collections::HashSet::new();
    for chunk in tokens.chunks(RENEWED_AT_ONCE) {
        let marks = crate::rows::bind_marks(chunk.len());
        let update = format!(
            "UPDATE distlock_lease SET expires_at_ms = ? WHERE expires_at_ms > ? AND token IN ({marks})"
        );
        let mut query = sqlx::query(&update)
            .bind(now.saturating_add(millis(ttl)))
            .bind(now);
        for token in chunk {
            query = query.bind(token);
        }
        query.execute(pool).await.map_err(&err)?;
        let live = format!(
            "SELECT token FROM distlock_lease WHERE expires_at_ms > ? AND token IN ({marks})"
        );
        let mut query = sqlx::query_scalar(&live).bind(now);
        for token in chunk {
            query = query.bind(token);
        }
        let live: Vec<String> = query.fetch_all(pool).await.map_err(&err)?;
        renewed.extend(live);
    }
    Ok(tokens.iter().map(|t| renewed.contains(t)).collect())
}

/// Deletes the grant under `token`: whether it was there and still valid, and the waiter
/// to wake.
pub(super) async fn release(
    pool: &SqlitePool,
    clock: LeaseClock,
    name: &str,
    token: &str,
) -> Result<Released> {
    lease_engine::release(&SqliteLeases(clock), pool, name, token).await
}

/// Breaks `name`'s grant with `fencing_token` (every grant: `None`), the counter bumped
/// first: the grants broken, and the waiter to wake.
pub(super) async fn force_release(
    pool: &SqlitePool,
    clock: LeaseClock,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<Broken> {
    lease_engine::force_release(&SqliteLeases(clock), pool, name, fencing_token).await
}

/// Takes over the grant `handed` with `fencing_token` for `request` (see
/// [`lease_engine::adopt`]).
pub(super) async fn adopt(
    pool: &SqlitePool,
    clock: LeaseClock,
    handed: &str,
    fencing_token: u64,
    request: &LockRequest,
) -> Result<Option<u64>> {
    lease_engine::adopt(&SqliteLeases(clock), pool, handed, fencing_token, request).await
}

/// The live holders and waiters of one name, or of every name with any.
pub(super) async fn inspect(
    pool: &SqlitePool,
    clock: LeaseClock,
    name: Option<&str>,
) -> Result<Vec<LockState>> {
    let err = db_error("inspect");
    let now = clock.now_ms();
    let filter = if name.is_some() {
        "name = ?1"
    } else {
        "?1 IS NULL"
    };
    let mut snapshot = pool.begin().await.map_err(&err)?;
    let holders = live_select("distlock_lease", HOLDER_COLUMNS, "fence", filter, "?2");
    let waiters = live_select("distlock_waiter", WAITER_COLUMNS, "seq", filter, "?2");
    let fences = format!(
        "SELECT name, value FROM distlock_fence WHERE {filter} AND (?1 IS NOT NULL OR name IN
           (SELECT name FROM distlock_lease WHERE expires_at_ms > ?2
            UNION SELECT name FROM distlock_waiter WHERE expires_at_ms > ?2))"
    );
    let mut rows = Vec::new();
    for select in [holders, waiters, fences] {
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
    let fences = name_values(&rows[2]).map_err(&err)?;
    snapshot.commit().await.map_err(&err)?;
    let mut states = live.into_states(&fences, now)?;
    // Since when each holds or waits, on the wall clock (the rows keep the lease clock).
    let to_wall = now_ms().saturating_sub(now);
    for state in &mut states {
        let metas = state.holders.iter_mut().map(|h| &mut h.meta);
        for meta in metas.chain(state.waiters.iter_mut().map(|w| &mut w.meta)) {
            meta.acquired_at_unix_ms = meta.acquired_at_unix_ms.saturating_add_signed(to_wall);
        }
    }
    Ok(states)
}

/// One `BEGIN IMMEDIATE; UPDATE; COMMIT` round: the floor of every lock operation.
pub(super) async fn floor_round(pool: &SqlitePool) -> Result<()> {
    let err = db_error("floor");
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(&err)?;
    sqlx::query("UPDATE distlock_floor SET n = n + 1 WHERE id = 1")
        .execute(&mut *tx)
        .await
        .map_err(&err)?;
    tx.commit().await.map_err(&err)
}

async fn live_rows(
    conn: &mut SqliteConnection,
    name: &str,
) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)> {
    let holders = rows_of(
        conn,
        "distlock_lease",
        HOLDER_COLUMNS,
        "fence",
        name,
        holder,
    )
    .await?;
    let waiters = rows_of(conn, "distlock_waiter", WAITER_COLUMNS, "seq", name, waiter).await?;
    Ok((holders, waiters))
}

/// Every row of `table` for lock `name`, in `order`, read by `read`.
async fn rows_of<T>(
    conn: &mut SqliteConnection,
    table: &str,
    columns: &str,
    order: &str,
    name: &str,
    read: fn(&SqliteRow, usize) -> sqlx::Result<T>,
) -> sqlx::Result<Vec<T>> {
    sqlx::query(&format!(
        "SELECT {columns} FROM {table} WHERE name = ?1 ORDER BY {order}"
    ))
    .bind(name)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| read(row, 0))
    .collect()
}

async fn purge_expired(conn: &mut SqliteConnection, name: &str, now: i64) -> sqlx::Result<u64> {
    let leases = sqlx::query("DELETE FROM distlock_lease WHERE name = ?1 AND expires_at_ms <= ?2")
        .bind(name)
        .bind(now)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    let waiters =
        sqlx::query("DELETE FROM distlock_waiter WHERE name = ?1 AND expires_at_ms <= ?2")
            .bind(name)
            .bind(now)
            .execute(&mut *conn)
            .await?
            .rows_affected();
    Ok(leases + waiters)
}
