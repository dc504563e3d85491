//! MySQL's part of session mode: `GET_LOCK` on connections of their own, behind the
//! shared [`SessionDialect`]. Every statement of session mode is here.

use std::sync::LazyLock;
use std::time::Duration;

use distlock_core::backend::{LockRequest, async_trait};
use distlock_core::{Error, Result};
use futures_util::future::BoxFuture;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool, Row};

use super::{CLOCK_MS, CLOCK_US, db_error, lock_key};
use crate::lease_table::{HolderRow, LiveRows, WaiterRow, millis};
use crate::rows::LeaseRow;
use crate::session::{NoteWrite, SessionDialect, Tried, WaitEnd};

/// How long a blocking `GET_LOCK` waits at most (a year: it is stopped by `KILL QUERY`).
const WAIT_SECONDS: u64 = 31_536_000;

/// Records the grant of a key with its fencing token — one more than the key's last, and
/// never below the clock — taken with `LAST_INSERT_ID(…)` so the statement's own reply
/// carries it. `{taken}` decides whether the lock is held (binds: key, token, owner, host,
/// pid, TTL in ms, then `{taken}`'s).
const RECORD_GRANT: &str = "INSERT INTO distlock_session_lock
       (lock_key, fence, conn, token, owner, host, pid, since_ms, ttl_ms)
     SELECT ?, LAST_INSERT_ID(GREATEST(1, {CLOCK_US})), CONNECTION_ID(), ?, LEFT(?, 256),
            LEFT(?, 255), ?, {CLOCK_MS}, ?
     FROM DUAL WHERE {taken}
     ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US})),
       conn = VALUES(conn), token = VALUES(token), owner = VALUES(owner), host = VALUES(host),
       pid = VALUES(pid), since_ms = VALUES(since_ms), ttl_ms = VALUES(ttl_ms)";

/// A live lease of the key exists (bind: the key).
static LEASE_LIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "EXISTS (SELECT 1 FROM distlock_lease WHERE lock_key = ? AND expires_at_ms > {CLOCK_MS})"
    )
});

/// [`RECORD_GRANT`] taking the lock if `taken` (an SQL condition whose two parameters are
/// both the key) holds.
fn record_grant_if(taken: &str) -> String {
    RECORD_GRANT
        .replace("{taken}", taken)
        .replace("{CLOCK_US}", CLOCK_US)
        .replace("{CLOCK_MS}", CLOCK_MS)
}

/// The try: no live lease of the key, then `GET_LOCK` without waiting. A lease is granted
/// only while its transaction holds the key's `GET_LOCK`, and that lock is let go only
/// after the grant commits, by a statement that reads `distlock_session_lock`. This
/// statement writes that in-memory table, which stays locked to its end, so it cannot
/// straddle a lease grant: either it sees the committed lease, or its `GET_LOCK` meets the
/// lease's.
static TRY_GRANT: LazyLock<String> =
    LazyLock::new(|| record_grant_if(&format!("NOT {} AND GET_LOCK(?, 0) = 1", *LEASE_LIVE)));

/// After a wait in `GET_LOCK`: still ours, and no live lease (checked after the lock,
/// which is sound on its own).
static WAIT_GRANT: LazyLock<String> = LazyLock::new(|| {
    record_grant_if(&format!(
        "IS_USED_LOCK(?) = CONNECTION_ID() AND NOT {}",
        *LEASE_LIVE
    ))
});

/// A connection, the server's id for it, and the `wait_timeout` it was last given.
pub(super) struct MyConn {
    conn: MySqlConnection,
    id: i64,
    wait_timeout: u64,
}

/// `GET_LOCK` on connections of their own.
pub(super) struct MysqlSessions {
    options: MySqlConnectOptions,
    pool: MySqlPool,
}

impl MysqlSessions {
    /// Sessions opened with `options`; `pool` serves the statements that stop a wait.
    pub(super) fn new(options: &MySqlConnectOptions, pool: MySqlPool) -> MysqlSessions {
        MysqlSessions {
            options: options.clone(),
            pool,
        }
    }

    /// Records the full name behind a hashed key, at every request for it: the fence sweep
    /// deletes the name rows of keys no session holds or waits for, so a client cannot
    /// remember having written one.
    async fn record_name(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        key: &str,
    ) -> sqlx::Result<()> {
        if key == name {
            return Ok(());
        }
        sqlx::query("INSERT IGNORE INTO distlock_name (lock_key, name) VALUES (?, ?)")
            .bind(key)
            .bind(name)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// The `wait_timeout` that closes a holder's connection once its renewals stop for a TTL:
/// whole seconds, rounded up.
fn idle_limit(ttl: Duration) -> u64 {
    let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    seconds.clamp(1, WAIT_SECONDS)
}

/// Gives the session the idle limit of `ttl`, unless it has it already.
async fn arm(conn: &mut MyConn, ttl: Duration) -> sqlx::Result<()> {
    let limit = idle_limit(ttl);
    if conn.wait_timeout != limit {
        let set = format!("SET SESSION wait_timeout = {limit}");
        conn.conn.execute(set.as_str()).await?;
        conn.wait_timeout = limit;
    }
    Ok(())
}

/// Runs `sql` (the [`TRY_GRANT`] or [`WAIT_GRANT`] statement) for `request` on `key`.
async fn record_grant(
    conn: &mut MySqlConnection,
    request: &LockRequest,
    key: &str,
    sql: &str,
) -> sqlx::Result<sqlx::mysql::MySqlQueryResult> {
    sqlx::query(sql)
        .bind(key)
        .bind(&request.token)
        .bind(request.owner.as_str())
        .bind(&request.meta.host)
        .bind(i64::from(request.meta.pid))
        .bind(millis(request.ttl))
        .bind(key)
        .bind(key)
        .execute(conn)
        .await
}

#[async_trait]
impl SessionDialect for MysqlSessions {
    type Conn = MyConn;
    type Key = String;

    const BACKEND: &'static str = "mysql";

    fn error(operation: &'static str, err: sqlx::Error) -> Error {
        db_error(operation)(err)
    }

    /// MySQL closes idle connections after `wait_timeout` and may say so first with an
    /// error of its own: any failure of a reused connection may mean it is stale.
    fn connection_gone(err: &sqlx::Error) -> bool {
        matches!(
            err,
            sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Database(_)
        )
    }

    fn key(&self, request: &LockRequest) -> String {
        lock_key(&request.name)
    }

    async fn connect(&self) -> Result<MyConn> {
        let err = db_error("connect");
        let mut conn = self.options.connect().await.map_err(&err)?;
        let id: i64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(&mut conn)
            .await
            .map_err(&err)?;
        Ok(MyConn {
            conn,
            id,
            wait_timeout: 0,
        })
    }

    async fn try_lock(
        &self,
        conn: &mut MyConn,
        request: &LockRequest,
        key: &String,
    ) -> sqlx::Result<Tried> {
        arm(conn, request.ttl).await?;
        self.record_name(&mut conn.conn, &request.name, key).await?;
        let done = record_grant(&mut conn.conn, request, key, &TRY_GRANT).await?;
        let fence = (done.rows_affected() > 0).then(|| done.last_insert_id() as i64);
        let clash = match fence {
            Some(_) => None,
            None => leased(&mut conn.conn, key).await?,
        };
        Ok(Tried {
            fence,
            conn_id: conn.id,
            others: Vec::new(),
            clash,
        })
    }

    async fn wait(
        &self,
        conn: &mut MyConn,
        request: &LockRequest,
        key: &String,
    ) -> sqlx::Result<WaitEnd> {
        sqlx::query(&format!(
            "INSERT INTO distlock_session_waiter (conn, lock_key, token, owner, host, pid, since_ms)
             VALUES (CONNECTION_ID(), ?, ?, LEFT(?, 256), LEFT(?, 255), ?, {CLOCK_MS})
             ON DUPLICATE KEY UPDATE lock_key = VALUES(lock_key), token = VALUES(token),
               owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid),
               since_ms = VALUES(since_ms)"
        ))
        .bind(key)
        .bind(&request.token)
        .bind(request.owner.as_str())
        .bind(&request.meta.host)
        .bind(i64::from(request.meta.pid))
        .execute(&mut conn.conn)
        .await?;
        let got: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT CAST(GET_LOCK(?, {WAIT_SECONDS}) AS SIGNED)"
        ))
        .bind(key)
        .fetch_one(&mut conn.conn)
        .await?;
        if got != Some(1) {
            return Err(sqlx::Error::Protocol(
                "the wait in GET_LOCK was stopped".into(),
            ));
        }
        let sent = tokio::time::Instant::now();
        let done = record_grant(&mut conn.conn, request, key, &WAIT_GRANT).await?;
        if done.rows_affected() > 0 {
            return Ok(Ok((done.last_insert_id() as i64, sent)));
        }
        match leased(&mut conn.conn, key).await? {
            Some(other) => Ok(Err(other)),
            None => Err(sqlx::Error::Protocol(
                "a granted GET_LOCK was not held".into(),
            )),
        }
    }

    async fn interrupt(&self, conn_id: i64) -> sqlx::Result<()> {
        let kill = format!("KILL QUERY {conn_id}");
        self.pool.execute(kill.as_str()).await.map(drop)
    }

    async fn forget_waiter(&self, conn_id: i64, token: &str) -> sqlx::Result<()> {
        sqlx::query("DELETE FROM distlock_session_waiter WHERE conn = ? AND token = ?")
            .bind(conn_id)
            .bind(token)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    async fn renew(&self, conn: &mut MyConn, key: &String, ttl: Duration) -> sqlx::Result<bool> {
        arm(conn, ttl).await?;
        let mine: Option<i64> =
            sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)")
                .bind(key)
                .fetch_one(&mut conn.conn)
                .await?;
        Ok(mine == Some(1))
    }

    async fn write_note(
        &self,
        conn: &mut MyConn,
        key: &String,
        name: &str,
        note: &NoteWrite<'_>,
    ) -> sqlx::Result<Option<i64>> {
        super::notes::write_held(&mut conn.conn, key, name, note).await
    }

    async fn unlock(&self, conn: &mut MyConn, key: &String) -> sqlx::Result<bool> {
        let released: Option<i64> = sqlx::query_scalar("SELECT CAST(RELEASE_LOCK(?) AS SIGNED)")
            .bind(key)
            .fetch_one(&mut conn.conn)
            .await?;
        Ok(released == Some(1))
    }

    async fn sleep(&self, conn: &mut MyConn) -> sqlx::Result<()> {
        sqlx::query("DO SLEEP(10)")
            .execute(&mut conn.conn)
            .await
            .map(drop)
    }

    async fn ping(&self, conn: &mut MyConn) -> sqlx::Result<()> {
        sqlx::query("SELECT 1")
            .execute(&mut conn.conn)
            .await
            .map(drop)
    }

    fn close(conn: MyConn) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = conn.conn.close().await;
        })
    }
}

/// After a try that did not take the lock: what else holds the name, if a live lease does.
/// The try's check and its `GET_LOCK` may run in either order, so a `GET_LOCK` taken by a
/// try refused for a lease is let go here.
async fn leased(conn: &mut MySqlConnection, key: &str) -> sqlx::Result<Option<&'static str>> {
    let row = sqlx::query(&format!(
        "SELECT CAST({} AS SIGNED),
                CAST(IF(IS_USED_LOCK(?) = CONNECTION_ID(), RELEASE_LOCK(?), 0) AS SIGNED)",
        *LEASE_LIVE
    ))
    .bind(key)
    .bind(key)
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    let leased: i64 = row.try_get(0)?;
    Ok((leased != 0).then_some("a read/write lock or semaphore"))
}

/// Adds the session locks' live holders and waiters of one name (or of all) to `live`:
/// recorded grants whose connection holds the lock right now, and recorded waiters whose
/// connection waits in `GET_LOCK` right now.
pub(super) async fn live_sessions(
    conn: &mut MySqlConnection,
    name: Option<&str>,
    now: i64,
    live: &mut LiveRows,
) -> sqlx::Result<()> {
    let key = name.map(lock_key);
    let holders = sqlx::query(
        "SELECT COALESCE(n.name, s.lock_key), s.token, s.owner, s.fence, s.host, s.pid,
                s.since_ms, s.ttl_ms
         FROM distlock_session_lock s LEFT JOIN distlock_name n ON n.lock_key = s.lock_key
         WHERE (? IS NULL OR s.lock_key = ?) AND IS_USED_LOCK(s.lock_key) = s.conn",
    )
    .bind(&key)
    .bind(&key)
    .fetch_all(&mut *conn)
    .await?;
    for row in holders {
        live.holder(
            row.text(0)?,
            HolderRow {
                token: row.text(1)?,
                owner: row.text(2)?,
                kind: "mutex".into(),
                lim: 1,
                permits: 1,
                fence: row.try_get(3)?,
                expires_at_ms: now.saturating_add(row.try_get(7)?),
                host: row.text(4)?,
                pid: row.try_get(5)?,
                acquired_at_ms: row.try_get(6)?,
            },
        );
    }
    let waiters = sqlx::query(
        "SELECT COALESCE(n.name, w.lock_key), w.token, w.owner, w.host, w.pid, w.since_ms
         FROM distlock_session_waiter w
         JOIN information_schema.PROCESSLIST p ON p.ID = w.conn AND p.STATE = 'User lock'
         LEFT JOIN distlock_name n ON n.lock_key = w.lock_key
         WHERE (? IS NULL OR w.lock_key = ?) ORDER BY w.since_ms",
    )
    .bind(&key)
    .bind(&key)
    .fetch_all(&mut *conn)
    .await?;
    for row in waiters {
        let since_ms: i64 = row.try_get(5)?;
        live.waiter(
            row.text(0)?,
            WaiterRow {
                seq: since_ms,
                token: row.text(1)?,
                owner: row.text(2)?,
                kind: "mutex".into(),
                lim: 1,
                permits: 1,
                fair: true,
                host: row.text(3)?,
                pid: row.try_get(4)?,
                since_ms,
                expires_at_ms: now.saturating_add(1),
            },
        );
    }
    Ok(())
}
