//! Every SQL statement of MySQL's lease mode, as functions over the pool. Each runs to the
//! end once started (the backend runs them on their own tasks), so a caller that gives up
//! never leaves a transaction half done. Time is the database's: each transaction reads
//! the clock once and decides by it. Changes to one key run one at a time: each
//! transaction first locks the key's fencing-counter row.

use std::collections::BTreeMap;
use std::time::Duration;

use distlock_core::backend::{LockRequest, PollOutcome};
use distlock_core::{Error, HolderInfo, LockState, Result};
use sqlx::mysql::MySqlConnection;
use sqlx::{MySql, MySqlPool, Row};

use super::session::live_sessions;
use super::{CLOCK_MS, CLOCK_US, db_error, lock_key};
pub(super) use crate::lease_engine::Wake;
use crate::lease_engine::{self, LeaseDialect, Locked};
use crate::lease_table::{
    HolderRow, LiveRows, WAITER_LEASE, WaiterRow, may_grant, millis, retry_within,
};
use crate::rows::{
    HOLDER_COLUMNS, LeaseRow, WAITER_COLUMNS, add_live, bind_claim, bind_grant_meta, bind_waiter,
    holder, live_select, waiter,
};
use crate::session::kind_clash;

/// A session-mode mutex holds the key (binds: the key twice): the connection holding its
/// `GET_LOCK` is the one its grant recorded. A `GET_LOCK` held otherwise is a lease
/// grant's gate, or another program's.
const SESSION_HOLDS: &str = "EXISTS (SELECT 1 FROM distlock_session_lock
                                   WHERE lock_key = ? AND conn = IS_USED_LOCK(?))";

/// Locks the key's counter row (creating it at 0); the database's clock, and whether a
/// session-mode mutex holds the key, read in one round trip.
async fn lock_key_row(conn: &mut MySqlConnection, key: &str) -> sqlx::Result<(i64, bool)> {
    sqlx::query(
        "INSERT INTO distlock_fence (lock_key, value) VALUES (?, 0)
         ON DUPLICATE KEY UPDATE value = value",
    )
    .bind(key)
    .execute(&mut *conn)
    .await?;
    let row = sqlx::query(&format!(
        "SELECT {CLOCK_MS}, CAST({SESSION_HOLDS} AS SIGNED)"
    ))
    .bind(key)
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row.try_get(0)?, row.try_get::<i64, _>(1)? != 0))
}

/// Deletes the key's expired grants and queue rows; how many went.
async fn purge(conn: &mut MySqlConnection, key: &str, now: i64) -> sqlx::Result<u64> {
    let mut gone = 0;
    for table in ["distlock_lease", "distlock_waiter"] {
        gone += sqlx::query(&format!(
            "DELETE FROM {table} WHERE lock_key = ? AND expires_at_ms <= ?"
        ))
        .bind(key)
        .bind(now)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(gone)
}

/// MySQL's steps of the lease-table engine: the X lock of the key's counter row, the
/// database's clock; in session mode, the refusal of a name a session mutex holds and the
/// key's `GET_LOCK` as the gate of a grant. Waiters are woken only within this process.
struct MySqlLeases {
    /// Whether the client's session mode shares the key space.
    sessions: bool,
}

#[async_trait::async_trait]
impl LeaseDialect for MySqlLeases {
    type DB = MySql;

    /// A failed poll may leave the key's `GET_LOCK` held by its connection.
    const CLOSE_ON_ERROR: bool = true;

    fn error(operation: &'static str, err: sqlx::Error) -> Error {
        db_error(operation)(err)
    }

    fn pushed(&self, _channel: &str) -> bool {
        false
    }

    async fn lock(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        purge: bool,
    ) -> sqlx::Result<Locked> {
        let key = lock_key(name);
        let (now, session_held) = lock_key_row(conn, &key).await?;
        let purged = match purge {
            true => self::purge(conn, &key, now).await?,
            false => 0,
        };
        Ok(Locked {
            now,
            purged,
            session_held,
        })
    }

    async fn refuse(
        &self,
        _: &mut MySqlConnection,
        request: &LockRequest,
        locked: &Locked,
    ) -> Result<()> {
        match self.sessions && locked.session_held {
            true => Err(kind_clash(&request.name, "a mutex held by a session")),
            false => Ok(()),
        }
    }

    async fn live_rows(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
    ) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)> {
        let key = &lock_key(name);
        let holders = sqlx::query(&format!(
            "SELECT {HOLDER_COLUMNS} FROM distlock_lease WHERE lock_key = ? AND name = ? ORDER BY fence"
        ))
        .bind(key)
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| holder(row, 0))
        .collect::<sqlx::Result<_>>()?;
        let waiters = sqlx::query(&format!(
            "SELECT {WAITER_COLUMNS} FROM distlock_waiter WHERE lock_key = ? AND name = ? ORDER BY seq"
        ))
        .bind(key)
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| waiter(row, 0))
        .collect::<sqlx::Result<_>>()?;
        Ok((holders, waiters))
    }

    /// In session mode, a grant is made while this connection holds the key's
    /// `GET_LOCK`, let go after the commit as [`LeaseDialect::let_go_gate`] says.
    async fn take_gate(&self, conn: &mut MySqlConnection, name: &str) -> Result<bool> {
        if !self.sessions {
            return Ok(false);
        }
        match take_gate(conn, &lock_key(name))
            .await
            .map_err(db_error("acquire"))?
        {
            true => Ok(true),
            false => Err(kind_clash(name, "a mutex held by a session")),
        }
    }

    /// Lets go of the key's `GET_LOCK` after the grant committed, in a statement that reads
    /// `distlock_session_lock`: it cannot run while a session mutex's check-and-lock statement
    /// (which writes that in-memory, table-locked table) runs, so that statement either saw the
    /// committed grant or met this lock.
    async fn let_go_gate(&self, conn: &mut MySqlConnection, name: &str) -> sqlx::Result<()> {
        let key = &lock_key(name);
        sqlx::query(
            "SELECT RELEASE_LOCK(?), (SELECT COUNT(*) FROM distlock_session_lock WHERE lock_key = ?)",
        )
        .bind(key)
        .bind(key)
        .execute(&mut *conn)
        .await
        .map(drop)
    }

    /// Mints the next fencing token (one more than the last, never below the clock in
    /// microseconds, as in session mode), writes the grant and leaves the queue.
    async fn grant(
        &self,
        conn: &mut MySqlConnection,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<i64> {
        let key = &lock_key(&request.name);
        let fence = sqlx::query(&format!(
            "UPDATE distlock_fence SET value = LAST_INSERT_ID(GREATEST(value + 1, {CLOCK_US}))
             WHERE lock_key = ?"
        ))
        .bind(key)
        .execute(&mut *conn)
        .await?
        .last_insert_id() as i64;
        let insert = sqlx::query(
            "INSERT INTO distlock_lease
               (token, name, owner, kind, lim, permits, fence, expires_at_ms, host, pid,
                acquired_at_ms, lock_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        );
        bind_grant_meta(bind_claim(insert, request).bind(fence), request, now)
            .bind(key)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM distlock_waiter WHERE token = ?")
            .bind(&request.token)
            .execute(&mut *conn)
            .await?;
        Ok(fence)
    }

    async fn keep_queued(
        &self,
        conn: &mut MySqlConnection,
        request: &LockRequest,
        now: i64,
        channel: &str,
    ) -> sqlx::Result<()> {
        let key = &lock_key(&request.name);
        let insert = sqlx::query(
            "INSERT INTO distlock_waiter
               (token, name, owner, kind, lim, permits, fair, expires_at_ms, host, pid, since_ms,
                wake, lock_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON DUPLICATE KEY UPDATE expires_at_ms = VALUES(expires_at_ms)",
        );
        bind_waiter(insert, request, now, channel)
            .bind(key)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// The live waiter at the head of the name's queue and its client's wake-up channel.
    async fn wake_next(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        now: i64,
    ) -> sqlx::Result<Option<Wake>> {
        let key = &lock_key(name);
        let row = sqlx::query(
            "SELECT token, wake FROM distlock_waiter
             WHERE lock_key = ? AND name = ? AND expires_at_ms > ? ORDER BY seq LIMIT 1",
        )
        .bind(key)
        .bind(name)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
        row.map(|row| {
            Ok(Wake {
                token: row.text(0)?,
                address: row.text(1)?,
            })
        })
        .transpose()
    }

    async fn delete_request(&self, conn: &mut MySqlConnection, token: &str) -> sqlx::Result<u64> {
        let mut removed = 0;
        for table in ["distlock_waiter", "distlock_lease"] {
            removed += sqlx::query(&format!("DELETE FROM {table} WHERE token = ?"))
                .bind(token)
                .execute(&mut *conn)
                .await?
                .rows_affected();
        }
        Ok(removed)
    }

    /// MySQL has no `DELETE … RETURNING`: the row is read under its lock, then deleted.
    async fn delete_grant(
        &self,
        conn: &mut MySqlConnection,
        token: &str,
    ) -> sqlx::Result<Option<i64>> {
        let expiry: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at_ms FROM distlock_lease WHERE token = ? FOR UPDATE",
        )
        .bind(token)
        .fetch_optional(&mut *conn)
        .await?;
        if expiry.is_some() {
            sqlx::query("DELETE FROM distlock_lease WHERE token = ?")
                .bind(token)
                .execute(&mut *conn)
                .await?;
        }
        Ok(expiry)
    }

    /// The key's counter row exists: [`lock`](LeaseDialect::lock) made it.
    async fn bump_fence(&self, conn: &mut MySqlConnection, name: &str) -> sqlx::Result<()> {
        sqlx::query(&format!(
            "UPDATE distlock_fence SET value = GREATEST(value + 1, {CLOCK_US}) WHERE lock_key = ?"
        ))
        .bind(lock_key(name))
        .execute(&mut *conn)
        .await
        .map(drop)
    }
}

/// Decides a request (see [`lease_engine::poll`]), queuing it with `channel` as its
/// wake-up channel; and says whom to wake if room was left. With `sessions`, a name held
/// by a session lock is refused.
pub(super) async fn poll(
    pool: &MySqlPool,
    request: &LockRequest,
    channel: &str,
    sessions: bool,
) -> Result<(PollOutcome, Option<Wake>)> {
    let polled = lease_engine::poll(&MySqlLeases { sessions }, pool, request, channel).await?;
    Ok((polled.outcome, polled.wake))
}

/// Takes the key's `GET_LOCK`; whether it was taken. Once taken, no session mutex can take
/// the key until [`LeaseDialect::let_go_gate`]. If the lock is busy but no session mutex holds it, it is
/// the gate of the grant before this one, let go right after that grant's commit: waited
/// for, up to a second.
async fn take_gate(conn: &mut MySqlConnection, key: &str) -> sqlx::Result<bool> {
    let mut taken = get_lock(conn, key, 0).await?;
    if !taken && !session_holds(conn, key).await? {
        taken = get_lock(conn, key, 1).await?;
    }
    Ok(taken)
}

async fn get_lock(conn: &mut MySqlConnection, key: &str, seconds: u32) -> sqlx::Result<bool> {
    let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, ?) AS SIGNED)")
        .bind(key)
        .bind(seconds)
        .fetch_one(&mut *conn)
        .await?;
    Ok(got == Some(1))
}

/// Whether a session-mode mutex holds the key: the connection holding its `GET_LOCK` is the
/// one its grant recorded.
async fn session_holds(conn: &mut MySqlConnection, key: &str) -> sqlx::Result<bool> {
    let held: i64 = sqlx::query_scalar(&format!("SELECT CAST({SESSION_HOLDS} AS SIGNED)"))
        .bind(key)
        .bind(key)
        .fetch_one(&mut *conn)
        .await?;
    Ok(held != 0)
}

/// What a queued waiter can tell without a transaction or any lock: `Some` (still waiting,
/// and how soon to look again) when live grants are in its way and its queue row outlives
/// half its lease; `None` when the locking [`poll`] must decide, because a grant may be
/// possible or the queue row is due to be rewritten. The two reads need not agree on one
/// moment: a wrong "wait" costs one more look, a wrong "maybe" one transaction. Waiters
/// that only look take no row lock, so they never queue behind the holder's release.
pub(super) async fn peek(pool: &MySqlPool, request: &LockRequest) -> Result<Option<PollOutcome>> {
    let err = db_error("acquire");
    let key = lock_key(&request.name);
    let waiter_rows = sqlx::query(&format!(
        "SELECT {CLOCK_MS}, {WAITER_COLUMNS} FROM distlock_waiter
         WHERE lock_key = ? AND name = ? AND expires_at_ms > {CLOCK_MS} ORDER BY seq"
    ))
    .bind(&key)
    .bind(&request.name)
    .fetch_all(pool)
    .await
    .map_err(&err)?;
    let waiters = waiter_rows
        .iter()
        .map(|row| waiter(row, 1))
        .collect::<sqlx::Result<Vec<_>>>()
        .map_err(&err)?;
    let Some(at) = waiters.iter().position(|w| w.token == request.token) else {
        return Ok(None);
    };
    let now: i64 = waiter_rows[at].int(0).map_err(&err)?;
    if waiters[at].expires_at_ms - now <= millis(WAITER_LEASE / 2) {
        return Ok(None);
    }
    let holders: Vec<HolderRow> = sqlx::query(&format!(
        "SELECT {HOLDER_COLUMNS} FROM distlock_lease
         WHERE lock_key = ? AND name = ? AND expires_at_ms > ? ORDER BY fence"
    ))
    .bind(&key)
    .bind(&request.name)
    .bind(now)
    .fetch_all(pool)
    .await
    .and_then(|rows| rows.iter().map(|row| holder(row, 0)).collect())
    .map_err(&err)?;
    if may_grant(&holders, &waiters, request, now)? {
        return Ok(None);
    }
    Ok(Some(PollOutcome::pending(retry_within(
        &holders,
        &waiters,
        &request.token,
        now,
        false,
    ))))
}

/// Deletes the queue row and any grant made under `token`; whom to wake if anything went.
pub(super) async fn cancel(pool: &MySqlPool, name: &str, token: &str) -> Result<Option<Wake>> {
    let leases = MySqlLeases { sessions: false };
    lease_engine::cancel(&leases, pool, name, token).await
}

/// Extends each unexpired grant under `tokens` to `ttl` from the database's now; whether
/// each was renewed, in order. Two statements and no transaction: the second reads the
/// grants that are live after the first, which are exactly those it renewed (a grant it
/// skipped had expired, and one released meanwhile is gone, which is as good as not held).
pub(super) async fn renew(pool: &MySqlPool, tokens: &[String], ttl: Duration) -> Result<Vec<bool>> {
    let err = db_error("renew");
    let marks = crate::rows::bind_marks(tokens.len());
    let update = format!(
        "UPDATE distlock_lease SET expires_at_ms = {CLOCK_MS} + ?
         WHERE token IN ({marks}) AND expires_at_ms > {CLOCK_MS}"
    );
    let mut query = sqlx::query(&update).bind(millis(ttl));
    for token in tokens {
        query = query.bind(token);
    }
    query.execute(pool).await.map_err(&err)?;
    let select = format!(
        "SELECT token FROM distlock_lease WHERE token IN ({marks}) AND expires_at_ms > {CLOCK_MS}"
    );
    let mut query = sqlx::query(&select);
    for token in tokens {
        query = query.bind(token);
    }
    let renewed = query
        .fetch_all(pool)
        .await
        .and_then(|rows| {
            rows.iter()
                .map(|row| row.text(0))
                .collect::<sqlx::Result<Vec<_>>>()
        })
        .map_err(&err)?;
    Ok(tokens.iter().map(|t| renewed.contains(t)).collect())
}

/// Deletes the grant under `token`; whether it was there and still valid, and whom to
/// wake.
pub(super) async fn release(
    pool: &MySqlPool,
    name: &str,
    token: &str,
) -> Result<(bool, Option<Wake>)> {
    let leases = MySqlLeases { sessions: false };
    let released = lease_engine::release(&leases, pool, name, token).await?;
    Ok((released.was_held, released.wake))
}

/// Breaks `name`'s grant with `fencing_token` (every grant: `None`), the counter bumped
/// first; the grants broken, and whom to wake.
pub(super) async fn force_release(
    pool: &MySqlPool,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<(Vec<HolderInfo>, Option<Wake>)> {
    let leases = MySqlLeases { sessions: false };
    let broken = lease_engine::force_release(&leases, pool, name, fencing_token).await?;
    Ok((broken.holders, broken.wake))
}

/// Takes over the grant `handed` with `fencing_token` for `request` (see
/// [`lease_engine::adopt`]).
pub(super) async fn adopt(
    pool: &MySqlPool,
    handed: &str,
    fencing_token: u64,
    request: &LockRequest,
) -> Result<Option<u64>> {
    let leases = MySqlLeases { sessions: false };
    lease_engine::adopt(&leases, pool, handed, fencing_token, request).await
}

/// The connection holding `name`'s session-mode `GET_LOCK` lock, if any.
pub(super) async fn session_holder(pool: &MySqlPool, name: &str) -> Result<Option<i64>> {
    sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
        .bind(lock_key(name))
        .fetch_one(pool)
        .await
        .map_err(db_error("force_release"))
}

/// The live holders and waiters of one name, or of every name with any; with `sessions`,
/// session-mode locks too.
pub(super) async fn inspect(
    pool: &MySqlPool,
    name: Option<&str>,
    sessions: bool,
) -> Result<Vec<LockState>> {
    let err = db_error("inspect");
    let mut snapshot = pool.begin().await.map_err(&err)?;
    let now: i64 = sqlx::query_scalar(&format!("SELECT {CLOCK_MS}"))
        .fetch_one(&mut *snapshot)
        .await
        .map_err(&err)?;
    let (filter, clock) = ("(? IS NULL OR name = ?)", "?");
    let holders = live_select("distlock_lease", HOLDER_COLUMNS, "fence", filter, clock);
    let waiters = live_select("distlock_waiter", WAITER_COLUMNS, "seq", filter, clock);
    let mut rows = Vec::new();
    for select in [holders, waiters] {
        rows.push(
            sqlx::query(&select)
                .bind(name)
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
        live_sessions(&mut snapshot, name, now, &mut live)
            .await
            .map_err(&err)?;
    }
    let fences = fences_of(&mut snapshot, &live.names())
        .await
        .map_err(&err)?;
    snapshot.commit().await.map_err(&err)?;
    live.into_states(&fences, now)
}

/// The last fencing token of each of `names`, in one round trip: the greater of the lease
/// counter and the session-mode counter of its key.
async fn fences_of(
    conn: &mut MySqlConnection,
    names: &[String],
) -> sqlx::Result<BTreeMap<String, i64>> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let by_key: BTreeMap<String, &String> = names.iter().map(|n| (lock_key(n), n)).collect();
    let marks = crate::rows::bind_marks(by_key.len());
    let sql = format!(
        "SELECT lock_key, CAST(MAX(value) AS SIGNED) FROM (
           SELECT lock_key, value FROM distlock_fence WHERE lock_key IN ({marks})
           UNION ALL
           SELECT lock_key, fence FROM distlock_session_lock WHERE lock_key IN ({marks})
         ) AS counters GROUP BY lock_key"
    );
    let mut query = sqlx::query(&sql);
    for _ in 0..2 {
        for key in by_key.keys() {
            query = query.bind(key);
        }
    }
    let mut fences = BTreeMap::new();
    for row in query.fetch_all(&mut *conn).await? {
        if let Some(name) = by_key.get(&row.text(0)?) {
            fences.insert((*name).clone(), row.int(1)?);
        }
    }
    Ok(fences)
}

/// One `SELECT 1` round trip on a pooled connection: the floor of every lock operation.
pub(super) async fn floor_round(pool: &MySqlPool) -> Result<()> {
    sqlx::query("SELECT 1")
        .execute(pool)
        .await
        .map_err(db_error("floor"))?;
    Ok(())
}
