//! The SQLite lease-table store.

use std::collections::BTreeMap;
use std::time::Duration;

use distlock_core::{
    Backend, Capabilities, Error, LeaseKey, LeaseOutcome, LocalWakers, LockRequest, LockState,
    PollOutcome, Result, Ticket, async_trait,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqliteConnection, SqlitePool};

use super::config::SqliteConfig;
use super::db_error;
use super::refreshes::Refreshes;
use super::rows::{HOLDER_COLUMNS, WAITER_COLUMNS, holder, waiter};
use crate::lease_table::{
    HolderRow, WAITER_LEASE, WaiterRow, lock_state, may_grant, millis, now_ms, retry_within,
};

const SCHEMA: &str = include_str!("schema.sql");

/// A lock store in one SQLite database file.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_sql::sqlite::{SqliteBackend, SqliteConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let url = distlock_core::Url::parse(&format!("sqlite://{}/locks.db", dir.path().display())).unwrap();
/// let backend = SqliteBackend::open(SqliteConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("a").lock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SqliteBackend {
    pool: SqlitePool,
    wakers: LocalWakers,
    queued: Refreshes,
}

impl SqliteBackend {
    /// Opens (creating if missing) the database and its tables.
    ///
    /// Several processes may open a new database at once; while one of them creates it and
    /// switches it to WAL mode the others see it locked, so opening retries until the busy
    /// timeout.
    ///
    /// # Examples
    ///
    /// See [`SqliteBackend`].
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(Error::new(
                    distlock_core::ErrorKind::InvalidInput,
                    format!(
                        "the directory of the lock database does not exist: {}",
                        dir.display()
                    ),
                )
                .with_backend("sqlite")
                .with_operation("connect"));
            }
        }
        let deadline = tokio::time::Instant::now() + config.busy_timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            match Self::try_open(&config).await {
                Ok(pool) => {
                    return Ok(SqliteBackend {
                        pool,
                        wakers: LocalWakers::new(),
                        queued: Refreshes::default(),
                    });
                }
                Err(err) if err.is_temporary() && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %err, "the lock database is busy; opening again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn try_open(config: &SqliteConfig) -> Result<SqlitePool> {
        let options = SqliteConnectOptions::new()
            .filename(&config.path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(if config.full_sync {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            })
            .busy_timeout(config.busy_timeout);
        // One connection: SQLite runs one writer at a time anyway, and queueing in the pool
        // is fairer and cheaper than queueing in SQLite's busy handler.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(config.busy_timeout + Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(db_error("connect"))?;
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_error("connect"))?;
        for statement in SCHEMA.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            sqlx::query(statement)
                .execute(&mut *tx)
                .await
                .map_err(db_error("connect"))?;
        }
        tx.commit().await.map_err(db_error("connect"))?;
        Ok(pool)
    }

    /// The pool the store runs on (one connection).
    ///
    /// # Examples
    ///
    /// ```
    /// # async fn f(backend: distlock_sql::sqlite::SqliteBackend) {
    /// let pool = backend.pool();
    /// # }
    /// ```
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The cheap half of a poll: a read-only look (no write lock, no disk flush) for a
    /// ticket that is already queued. `Some(Pending)` when it surely cannot be granted yet,
    /// nothing expired needs purging and its queue row is fresh; `None` when the poll must
    /// take the write path.
    async fn still_pending(&self, request: &LockRequest) -> Result<Option<PollOutcome>> {
        if !request.wait || !self.queued.fresh(&request.token) {
            return Ok(None);
        }
        let err = db_error("acquire");
        let now = now_ms();
        let mut snapshot = self.pool.begin().await.map_err(&err)?;
        let (holders, waiters) = Self::live_rows(&mut snapshot, &request.name)
            .await
            .map_err(&err)?;
        snapshot.commit().await.map_err(&err)?;
        let expired = holders.iter().any(|h| h.expires_at_ms <= now)
            || waiters.iter().any(|w| w.expires_at_ms <= now);
        let queued = waiters.iter().any(|w| w.token == request.token);
        if expired || !queued || may_grant(&holders, &waiters, request, now)? {
            return Ok(None);
        }
        Ok(Some(PollOutcome::Pending {
            retry_within: retry_within(&holders, &waiters, &request.token, now),
        }))
    }

    fn forget_ticket(&self, token: &str) {
        self.wakers.forget(token);
        self.queued.forget(token);
    }

    async fn live_rows(
        conn: &mut SqliteConnection,
        name: &str,
    ) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)> {
        let holders = sqlx::query(&format!(
            "SELECT {HOLDER_COLUMNS} FROM distlock_lease WHERE name = ?1 ORDER BY fence"
        ))
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| holder(row, 0))
        .collect::<sqlx::Result<Vec<_>>>()?;
        let waiters = sqlx::query(&format!(
            "SELECT {WAITER_COLUMNS} FROM distlock_waiter WHERE name = ?1 ORDER BY seq"
        ))
        .bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| waiter(row, 0))
        .collect::<sqlx::Result<Vec<_>>>()?;
        Ok((holders, waiters))
    }

    async fn purge_expired(conn: &mut SqliteConnection, name: &str, now: i64) -> sqlx::Result<u64> {
        let leases =
            sqlx::query("DELETE FROM distlock_lease WHERE name = ?1 AND expires_at_ms <= ?2")
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

    async fn grant(
        conn: &mut SqliteConnection,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<i64> {
        let fence: i64 = sqlx::query(
            "INSERT INTO distlock_fence (name, value) VALUES (?1, 1)
             ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value",
        )
        .bind(&request.name)
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
        sqlx::query(
            "INSERT INTO distlock_lease
               (token, name, owner, kind, lim, permits, fence, expires_at_ms, host, pid, acquired_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .bind(&request.token)
        .bind(&request.name)
        .bind(request.owner.as_str())
        .bind(request.kind.as_str())
        .bind(i64::from(request.kind.limit()))
        .bind(i64::from(request.permits))
        .bind(fence)
        .bind(now.saturating_add(millis(request.ttl)))
        .bind(&request.meta.host)
        .bind(i64::from(request.meta.pid))
        .bind(now)
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM distlock_waiter WHERE token = ?1")
            .bind(&request.token)
            .execute(&mut *conn)
            .await?;
        Ok(fence)
    }

    async fn keep_queued(
        conn: &mut SqliteConnection,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO distlock_waiter
               (token, name, owner, kind, lim, permits, fair, expires_at_ms, host, pid, since_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (token) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
        )
        .bind(&request.token)
        .bind(&request.name)
        .bind(request.owner.as_str())
        .bind(request.kind.as_str())
        .bind(i64::from(request.kind.limit()))
        .bind(i64::from(request.permits))
        .bind(i64::from(request.fair))
        .bind(now.saturating_add(millis(WAITER_LEASE)))
        .bind(&request.meta.host)
        .bind(i64::from(request.meta.pid))
        .bind(now)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn scheme(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::full(false)
    }

    async fn enqueue(&self, request: LockRequest) -> Result<Ticket> {
        let ticket = Ticket::new(request, None);
        if ticket.request.wait {
            self.wakers.register(&ticket);
        }
        Ok(ticket)
    }

    async fn poll(&self, ticket: &Ticket) -> Result<PollOutcome> {
        let request = &ticket.request;
        if let Some(pending) = self.still_pending(request).await? {
            return Ok(pending);
        }
        let err = db_error("acquire");
        let now = now_ms();
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(&err)?;
        let purged = Self::purge_expired(&mut tx, &request.name, now)
            .await
            .map_err(&err)?;
        let (holders, waiters) = Self::live_rows(&mut tx, &request.name)
            .await
            .map_err(&err)?;
        let outcome = if may_grant(&holders, &waiters, request, now)? {
            let fence = Self::grant(&mut tx, request, now).await.map_err(&err)?;
            PollOutcome::Granted {
                fencing_token: fence as u64,
            }
        } else {
            if request.wait {
                Self::keep_queued(&mut tx, request, now)
                    .await
                    .map_err(&err)?;
            }
            PollOutcome::Pending {
                retry_within: retry_within(&holders, &waiters, &request.token, now),
            }
        };
        tx.commit().await.map_err(&err)?;
        match outcome {
            PollOutcome::Granted { .. } => self.forget_ticket(&request.token),
            PollOutcome::Pending { .. } if request.wait => self.queued.refreshed(&request.token),
            PollOutcome::Pending { .. } => {}
        }
        if purged > 0 {
            self.wakers.wake_name(&request.name);
        }
        Ok(outcome)
    }

    async fn wait_for_change(&self, ticket: &Ticket, backstop: Duration) -> Result<()> {
        self.wakers.wait(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &Ticket) -> Result<()> {
        let err = db_error("cancel");
        let token = &ticket.request.token;
        self.forget_ticket(token);
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(&err)?;
        let mut removed = 0;
        for table in ["distlock_waiter", "distlock_lease"] {
            removed += sqlx::query(&format!("DELETE FROM {table} WHERE token = ?1"))
                .bind(token)
                .execute(&mut *tx)
                .await
                .map_err(&err)?
                .rows_affected();
        }
        tx.commit().await.map_err(&err)?;
        if removed > 0 {
            self.wakers.wake_name(&ticket.request.name);
        }
        Ok(())
    }

    async fn renew(&self, lease: &LeaseKey, ttl: Duration) -> Result<LeaseOutcome> {
        let now = now_ms();
        let renewed = sqlx::query(
            "UPDATE distlock_lease SET expires_at_ms = ?3 WHERE token = ?1 AND expires_at_ms > ?2",
        )
        .bind(&lease.token)
        .bind(now)
        .bind(now.saturating_add(millis(ttl)))
        .execute(&self.pool)
        .await
        .map_err(db_error("renew"))?
        .rows_affected();
        Ok(if renewed == 1 {
            LeaseOutcome::Done
        } else {
            LeaseOutcome::NotHeld
        })
    }

    async fn release(&self, lease: &LeaseKey) -> Result<LeaseOutcome> {
        let now = now_ms();
        let expiry: Option<i64> =
            sqlx::query("DELETE FROM distlock_lease WHERE token = ?1 RETURNING expires_at_ms")
                .bind(&lease.token)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error("release"))?
                .map(|row| row.try_get(0))
                .transpose()
                .map_err(db_error("release"))?;
        if expiry.is_some() {
            self.wakers.wake_name(&lease.name);
        }
        Ok(match expiry {
            Some(expires_at) if expires_at > now => LeaseOutcome::Done,
            _ => LeaseOutcome::NotHeld,
        })
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let err = db_error("inspect");
        let now = now_ms();
        let filter = if name.is_some() {
            "name = ?1"
        } else {
            "?1 IS NULL"
        };
        let mut conn = self.pool.acquire().await.map_err(&err)?;
        let holders = sqlx::query(&format!(
            "SELECT name, {HOLDER_COLUMNS} FROM distlock_lease
             WHERE {filter} AND expires_at_ms > ?2 ORDER BY name, fence"
        ))
        .bind(name)
        .bind(now)
        .fetch_all(&mut *conn)
        .await
        .map_err(&err)?;
        let waiters = sqlx::query(&format!(
            "SELECT name, {WAITER_COLUMNS} FROM distlock_waiter
             WHERE {filter} AND expires_at_ms > ?2 ORDER BY name, seq"
        ))
        .bind(name)
        .bind(now)
        .fetch_all(&mut *conn)
        .await
        .map_err(&err)?;
        let mut by_name: BTreeMap<String, (Vec<HolderRow>, Vec<WaiterRow>)> = BTreeMap::new();
        if let Some(name) = name {
            by_name.entry(name.to_owned()).or_default();
        }
        for row in &holders {
            let n: String = row.try_get(0).map_err(&err)?;
            by_name
                .entry(n)
                .or_default()
                .0
                .push(holder(row, 1).map_err(&err)?);
        }
        for row in &waiters {
            let n: String = row.try_get(0).map_err(&err)?;
            by_name
                .entry(n)
                .or_default()
                .1
                .push(waiter(row, 1).map_err(&err)?);
        }
        let mut states = Vec::with_capacity(by_name.len());
        for (n, (h, w)) in by_name {
            let fence: i64 = sqlx::query("SELECT value FROM distlock_fence WHERE name = ?1")
                .bind(&n)
                .fetch_optional(&mut *conn)
                .await
                .map_err(&err)?
                .map(|row| row.try_get(0))
                .transpose()
                .map_err(&err)?
                .unwrap_or(0);
            states.push(lock_state(n, fence, &h, &w, now)?);
        }
        Ok(states)
    }

    fn floor_op(&self) -> &'static str {
        "BEGIN IMMEDIATE; UPDATE; COMMIT"
    }

    async fn floor_round(&self) -> Result<()> {
        let err = db_error("floor");
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(&err)?;
        sqlx::query("UPDATE distlock_floor SET n = n + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
        tx.commit().await.map_err(&err)
    }
}
