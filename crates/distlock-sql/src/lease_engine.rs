//! One lease-table engine for every SQL store. Deciding a request, withdrawing it and
//! releasing a grant run the same flow on SQLite, PostgreSQL and MySQL: take the name's
//! write lock, purge its expired rows, read its live rows, let
//! [`admit`](distlock_core::backend::admit) decide, then grant or keep the request queued,
//! and name the waiter to wake. Each store says only how, in its SQL, through
//! [`LeaseDialect`]: how it serialises changes to a name and reads the clock, how it grants
//! and queues, how it wakes a waiter, and the checks its session mode adds.

use distlock_core::backend::{LockRequest, PollOutcome};
use distlock_core::{Error, HolderInfo, Result};
use sqlx::{Connection, Database, Pool};

use crate::lease_table::{HolderRow, WaiterRow, may_grant, retry_within};

/// The connection type of a dialect's database.
pub(crate) type Conn<D> = <<D as LeaseDialect>::DB as Database>::Connection;

/// What taking a name's write lock found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Locked {
    /// The store's clock, in milliseconds since the Unix epoch.
    pub(crate) now: i64,
    /// How many expired rows of the name were purged (none when not asked to purge).
    pub(crate) purged: u64,
    /// Whether a session-mode lock holds the name (MySQL reads it with the lock; no other
    /// store needs it).
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) session_held: bool,
}

/// A queued request to wake, and where its client listens (empty where the store wakes
/// its waiters itself, as PostgreSQL's `NOTIFY` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wake {
    pub(crate) token: String,
    pub(crate) address: String,
}

/// What a poll decided, and the waiter to wake if it left room for one (it purged an
/// expired grant, or took a share others may join).
#[derive(Debug)]
pub(crate) struct Polled {
    pub(crate) outcome: PollOutcome,
    /// (PostgreSQL's waiters are woken by the store.)
    #[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
    pub(crate) wake: Option<Wake>,
}

/// What a release found.
#[derive(Debug)]
pub(crate) struct Released {
    /// Whether the grant was there and still valid.
    pub(crate) was_held: bool,
    /// The waiter to wake now that the lock is free.
    #[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
    pub(crate) wake: Option<Wake>,
}

/// How one SQL store does each step of the engine's flow. Every step but the hooks runs
/// inside the write transaction [`LeaseDialect::BEGIN`] starts, after
/// [`LeaseDialect::lock`].
#[async_trait::async_trait]
pub(crate) trait LeaseDialect: Send + Sync {
    type DB: Database;

    /// The statement that begins a transaction that changes a name.
    const BEGIN: &'static str = "BEGIN";

    /// Whether a connection whose poll failed is closed rather than pooled again (it may
    /// hold a lock of the server's that outlives the transaction).
    const CLOSE_ON_ERROR: bool = false;

    /// The library error for a database error of `operation`.
    fn error(operation: &'static str, err: sqlx::Error) -> Error;

    /// Whether a waiter whose client listens at `wake_address` is woken when the lock may
    /// be free, so it may wait longer between polls.
    fn pushed(&self, wake_address: &str) -> bool;

    /// Serialises against every other change to `name` for the rest of the transaction,
    /// reads the clock, and with `purge` deletes the name's expired grants and queue rows.
    async fn lock(&self, conn: &mut Conn<Self>, name: &str, purge: bool) -> sqlx::Result<Locked>;

    /// Refuses a request the store's session mode stands in the way of (a kind clash).
    async fn refuse(
        &self,
        conn: &mut Conn<Self>,
        request: &LockRequest,
        locked: &Locked,
    ) -> Result<()> {
        let _ = (conn, request, locked);
        Ok(())
    }

    /// The name's grants (by fencing token) and queue rows (in arrival order), expired
    /// ones included.
    async fn live_rows(
        &self,
        conn: &mut Conn<Self>,
        name: &str,
    ) -> sqlx::Result<(Vec<HolderRow>, Vec<WaiterRow>)>;

    /// Before a grant: takes what keeps the store's session mode out until the grant has
    /// committed; whether there is something to let go of after the commit
    /// ([`LeaseDialect::let_go_gate`]). An error refuses the request.
    async fn take_gate(&self, conn: &mut Conn<Self>, name: &str) -> Result<bool> {
        let _ = (conn, name);
        Ok(false)
    }

    /// After the grant's commit, on the same connection: lets go of what
    /// [`LeaseDialect::take_gate`] took.
    async fn let_go_gate(&self, conn: &mut Conn<Self>, name: &str) -> sqlx::Result<()> {
        let _ = (conn, name);
        Ok(())
    }

    /// Grants the request: bumps the fencing counter, writes the grant, takes the request
    /// out of the queue; the grant's fencing token.
    async fn grant(
        &self,
        conn: &mut Conn<Self>,
        request: &LockRequest,
        now: i64,
    ) -> sqlx::Result<i64>;

    /// Queues the request, or renews its queue row, with its client's wake-up address.
    async fn keep_queued(
        &self,
        conn: &mut Conn<Self>,
        request: &LockRequest,
        now: i64,
        wake_address: &str,
    ) -> sqlx::Result<()>;

    /// The live waiter at the head of `name`'s queue, to wake (or wakes it itself).
    async fn wake_next(
        &self,
        conn: &mut Conn<Self>,
        name: &str,
        now: i64,
    ) -> sqlx::Result<Option<Wake>>;

    /// Deletes the queue row and any grant of `token`; how many rows went.
    async fn delete_request(&self, conn: &mut Conn<Self>, token: &str) -> sqlx::Result<u64>;

    /// Deletes the grant of `token`; its expiry, if it was there.
    async fn delete_grant(&self, conn: &mut Conn<Self>, token: &str) -> sqlx::Result<Option<i64>>;

    /// Bumps `name`'s fencing counter as a grant would, granting nothing.
    async fn bump_fence(&self, conn: &mut Conn<Self>, name: &str) -> sqlx::Result<()>;
}

/// Decides a request in one transaction: purges the name's expired rows, grants (fencing
/// counter, grant row, dequeue) or keeps the request queued with `wake_address`, and names
/// the waiter to wake if room was left.
pub(crate) async fn poll<D: LeaseDialect>(
    dialect: &D,
    pool: &Pool<D::DB>,
    request: &LockRequest,
    wake_address: &str,
) -> Result<Polled> {
    let mut conn = pool.acquire().await.map_err(|e| D::error("acquire", e))?;
    let decided = decide(dialect, &mut conn, request, wake_address).await;
    if decided.is_err() && D::CLOSE_ON_ERROR {
        // Whatever the connection still holds goes with it, never back to the pool.
        conn.close_on_drop();
    }
    decided
}

async fn decide<D: LeaseDialect>(
    dialect: &D,
    conn: &mut Conn<D>,
    request: &LockRequest,
    wake_address: &str,
) -> Result<Polled> {
    let err = |e| D::error("acquire", e);
    let name = request.name.as_str();
    let mut tx = conn.begin_with(D::BEGIN).await.map_err(err)?;
    let locked = dialect.lock(&mut tx, name, true).await.map_err(err)?;
    let now = locked.now;
    dialect.refuse(&mut tx, request, &locked).await?;
    let (holders, waiters) = dialect.live_rows(&mut tx, name).await.map_err(err)?;
    let granted = may_grant(&holders, &waiters, request, now)?;
    let gated = granted && dialect.take_gate(&mut tx, name).await?;
    let outcome = if granted {
        let fence = dialect.grant(&mut tx, request, now).await.map_err(err)?;
        PollOutcome::granted(fence as u64)
    } else {
        if request.wait {
            dialect
                .keep_queued(&mut tx, request, now, wake_address)
                .await
                .map_err(err)?;
        }
        let pushed = dialect.pushed(wake_address);
        PollOutcome::pending(retry_within(
            &holders,
            &waiters,
            &request.token,
            now,
            pushed,
        ))
    };
    let room_left = locked.purged > 0 || (granted && !request.kind.is_exclusive());
    let wake = match room_left {
        true => dialect.wake_next(&mut tx, name, now).await.map_err(err)?,
        false => None,
    };
    tx.commit().await.map_err(err)?;
    if gated {
        dialect.let_go_gate(conn, name).await.map_err(err)?;
    }
    Ok(Polled { outcome, wake })
}

/// Deletes the queue row and any grant made under `token`; if anything went, the waiter
/// to wake.
pub(crate) async fn cancel<D: LeaseDialect>(
    dialect: &D,
    pool: &Pool<D::DB>,
    name: &str,
    token: &str,
) -> Result<Option<Wake>> {
    let err = |e| D::error("cancel", e);
    let mut conn = pool.acquire().await.map_err(err)?;
    let mut tx = conn.begin_with(D::BEGIN).await.map_err(err)?;
    let Locked { now, .. } = dialect.lock(&mut tx, name, false).await.map_err(err)?;
    let removed = dialect.delete_request(&mut tx, token).await.map_err(err)?;
    let wake = match removed {
        0 => None,
        _ => dialect.wake_next(&mut tx, name, now).await.map_err(err)?,
    };
    tx.commit().await.map_err(err)?;
    Ok(wake)
}

/// What a forced release broke, and the waiter to wake.
#[derive(Debug)]
pub(crate) struct Broken {
    /// The grants broken, as `status` showed them.
    pub(crate) holders: Vec<HolderInfo>,
    /// The waiter to wake now that the lock is free.
    #[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
    pub(crate) wake: Option<Wake>,
}

/// Breaks `name`'s live grant with `fencing_token` (every live grant: `None`) in one
/// transaction: the fencing counter bumped, the grants deleted, the head waiter named.
pub(crate) async fn force_release<D: LeaseDialect>(
    dialect: &D,
    pool: &Pool<D::DB>,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<Broken> {
    let err = |e| D::error("force_release", e);
    let mut conn = pool.acquire().await.map_err(err)?;
    let mut tx = conn.begin_with(D::BEGIN).await.map_err(err)?;
    let Locked { now, .. } = dialect.lock(&mut tx, name, true).await.map_err(err)?;
    let (holders, _) = dialect.live_rows(&mut tx, name).await.map_err(err)?;
    let doomed: Vec<HolderRow> = holders
        .into_iter()
        .filter(|h| h.expires_at_ms > now)
        .filter(|h| fencing_token.is_none_or(|t| i64::try_from(t) == Ok(h.fence)))
        .collect();
    if doomed.is_empty() {
        tx.commit().await.map_err(err)?;
        return Ok(Broken {
            holders: vec![],
            wake: None,
        });
    }
    dialect.bump_fence(&mut tx, name).await.map_err(err)?;
    for grant in &doomed {
        dialect
            .delete_grant(&mut tx, &grant.token)
            .await
            .map_err(err)?;
    }
    let wake = dialect.wake_next(&mut tx, name, now).await.map_err(err)?;
    tx.commit().await.map_err(err)?;
    Ok(Broken {
        holders: doomed.iter().map(|h| h.info(now)).collect::<Result<_>>()?,
        wake,
    })
}

/// Takes over `name`'s live exclusive grant under request token `handed` with
/// `fencing_token` for `request`, in one transaction: the handed grant deleted and
/// `request` granted in its place (the fencing counter bumped). The new fencing token, or
/// `None` when the store does not hold that grant.
pub(crate) async fn adopt<D: LeaseDialect>(
    dialect: &D,
    pool: &Pool<D::DB>,
    handed: &str,
    fencing_token: u64,
    request: &LockRequest,
) -> Result<Option<u64>> {
    let err = |e| D::error("adopt", e);
    let name = request.name.as_str();
    let mut conn = pool.acquire().await.map_err(err)?;
    let mut tx = conn.begin_with(D::BEGIN).await.map_err(err)?;
    let Locked { now, .. } = dialect.lock(&mut tx, name, true).await.map_err(err)?;
    let (holders, _) = dialect.live_rows(&mut tx, name).await.map_err(err)?;
    let held = holders.iter().any(|h| {
        h.token == handed
            && i64::try_from(fencing_token) == Ok(h.fence)
            && h.expires_at_ms > now
            && matches!(h.kind.as_str(), "mutex" | "write")
    });
    if !held {
        tx.commit().await.map_err(err)?;
        return Ok(None);
    }
    let gated = dialect.take_gate(&mut tx, name).await?;
    dialect.delete_grant(&mut tx, handed).await.map_err(err)?;
    let fence = dialect.grant(&mut tx, request, now).await.map_err(err)?;
    tx.commit().await.map_err(err)?;
    if gated {
        dialect.let_go_gate(&mut conn, name).await.map_err(err)?;
    }
    Ok(u64::try_from(fence).ok())
}

/// Deletes the grant under `token`: whether it was there and still valid, and the waiter
/// to wake.
pub(crate) async fn release<D: LeaseDialect>(
    dialect: &D,
    pool: &Pool<D::DB>,
    name: &str,
    token: &str,
) -> Result<Released> {
    let err = |e| D::error("release", e);
    let mut conn = pool.acquire().await.map_err(err)?;
    let mut tx = conn.begin_with(D::BEGIN).await.map_err(err)?;
    let Locked { now, .. } = dialect.lock(&mut tx, name, false).await.map_err(err)?;
    let expiry = dialect.delete_grant(&mut tx, token).await.map_err(err)?;
    let wake = match expiry {
        Some(_) => dialect.wake_next(&mut tx, name, now).await.map_err(err)?,
        None => None,
    };
    tx.commit().await.map_err(err)?;
    Ok(Released {
        was_held: expiry.is_some_and(|expires_at| expires_at > now),
        wake,
    })
}
