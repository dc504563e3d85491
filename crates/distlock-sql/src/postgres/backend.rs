//! The PostgreSQL lock store: session-mode advisory locks and the lease table.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LocalWakers, Note, PollOutcome, Ticket,
    WritesPaused, adopt_refused, adopt_unsupported, async_trait,
};
use distlock_core::{Error, ErrorKind, HolderInfo, LockKind, LockState, Result, random_id};
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::task::AbortHandle;

use super::config::{Mode, PostgresConfig};
use super::session::PgSessions;
use super::upkeep::PgUpkeep;
use super::{db_error, notes, store};
use crate::fences::{self, Sweeper};
use crate::session::renew_split;
use crate::split::Split;
use crate::tasks::{WriteGate, detached, first_connection, outcome, poll_detached};

/// A lock store on one PostgreSQL database.
///
/// In session mode, mutexes and read/write locks are advisory locks, each held by a
/// connection of its own; semaphores (which PostgreSQL has no advisory form of) are leases.
/// In lease mode, every grant is a row of the shared lease table with a TTL from the
/// database's clock. Lease waiters are woken with LISTEN/NOTIFY on a channel of their
/// client's own; session waiters wait in the server's own lock queue.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_sql::postgres::{PostgresBackend, PostgresConfig};
///
/// let url = distlock_core::Url::parse("postgres://app:pw@127.0.0.1/app?mode=lease").unwrap();
/// let backend = PostgresBackend::open(PostgresConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// # Ok(()) }
/// ```
pub struct PostgresBackend {
    pool: PgPool,
    channel: String,
    listener: AbortHandle,
    redacted: String,
    split: Split<PgSessions>,
    /// What every write of this client's to the lease tables passes (see
    /// [`Backend::pause_writes`]).
    writes: WriteGate,
    /// Deletes idle fencing counters while the client lives (stops when dropped).
    _sweeper: Sweeper,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("url", &self.redacted)
            .finish()
    }
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresBackend {
    /// Connects, creates the tables if missing, and starts listening for wake-ups.
    ///
    /// # Examples
    ///
    /// See [`PostgresBackend`].
    pub async fn open(config: PostgresConfig) -> Result<Self> {
        first_connection("postgres", &config.options, config.connect_timeout).await?;
        let pool = PgPoolOptions::new()
            // One more for the wake-up listener, which keeps a pooled connection for good.
            .max_connections(config.pool + 1)
            .acquire_timeout(config.connect_timeout)
            .connect_with(config.options.clone())
            .await
            .map_err(db_error("connect"))?;
        store::prepare(&pool).await?;
        let sweeper = Sweeper::start(PgUpkeep(pool.clone()), None, config.fence_ttl);
        let sessions = match config.mode {
            Mode::Lease => None,
            Mode::Session => {
                check_session_support(&pool).await?;
                Some(PgSessions::new(&config.options, pool.clone()))
            }
        };
        // Mutexes and read/write locks are advisory locks; semaphores are leases.
        let split = Split::new(sessions, |kind| !matches!(kind, LockKind::Semaphore { .. }));
        let channel = format!("distlock_{}", random_id());
        let listener = listen(&pool, &channel, split.wakers.clone()).await?;
        Ok(PostgresBackend {
            pool,
            channel,
            listener,
            redacted: config.redacted,
            split,
            writes: WriteGate::default(),
            _sweeper: sweeper,
        })
    }

    /// Pairs of lock names this client found sharing one advisory-lock key (session mode).
    /// Such names exclude each other — safe, but a name may wait for an unrelated one;
    /// renaming one of them ends it. Each pair is also logged once as a warning.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(backend: &distlock_sql::postgres::PostgresBackend) {
    /// assert!(backend.key_collisions().is_empty());
    /// # }
    /// ```
    pub fn key_collisions(&self) -> Vec<(String, String)> {
        self.split
            .sessions()
            .map(|s| s.collisions())
            .unwrap_or_default()
    }

    /// The connection pool, e.g. to keep the application's own tables in the same
    /// database.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(backend: &distlock_sql::postgres::PostgresBackend) {
    /// let pool = backend.pool();
    /// # }
    /// ```
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Session mode ends a silent holder's session by `idle_session_timeout`, which
/// PostgreSQL has from version 14.
async fn check_session_support(pool: &PgPool) -> Result<()> {
    let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::INT")
        .fetch_one(pool)
        .await
        .map_err(db_error("connect"))?;
    if version < 140_000 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "PostgreSQL session mode needs server version 14 or newer (this one is {version}); use mode=lease"
            ),
        )
        .with_backend("postgres"));
    }
    Ok(())
}

/// Listens on `channel` and wakes the local waiter each notification names. A lost
/// connection is re-established by the listener; wake-ups sent meanwhile are lost, and
/// the waiters' bounded backstop covers them.
async fn listen(pool: &PgPool, channel: &str, wakers: Arc<LocalWakers>) -> Result<AbortHandle> {
    let mut listener = PgListener::connect_with(pool)
        .await
        .map_err(db_error("connect"))?;
    listener
        .listen(channel)
        .await
        .map_err(db_error("connect"))?;
    let task = tokio::spawn(async move {
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => wakers.wake(notification.payload()),
                Ok(None) => tracing::debug!("postgres wake-up listener reconnecting"),
                Err(err) => {
                    tracing::debug!(error = %err, "postgres wake-up listener failed; retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    });
    Ok(task.abort_handle())
}

#[async_trait]
impl Backend for PostgresBackend {
    fn scheme(&self) -> &'static str {
        "postgres"
    }

    /// In session mode, a session lock cannot be broken by another connection.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::full(true);
        // A session lock is held by its connection: no other connection can break it.
        caps.force_release = self.split.sessions().is_none();
        // Nor does it outlive its connection, nor pass to another.
        caps.detachable = self.split.sessions().is_none();
        caps.adopt = self.split.sessions().is_none();
        caps
    }

    fn grant_lost(&self, grant: &Grant) -> bool {
        self.split.grant_lost(grant)
    }

    fn loss_news(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.split.loss_news()
    }

    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        self.split.enqueue(ticket);
        Ok(())
    }

    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        if let Some(polled) = self.split.poll_session(ticket).await {
            return polled;
        }
        let (pool, request, channel) = (
            self.pool.clone(),
            ticket.request.clone(),
            self.channel.clone(),
        );
        let polled = poll_detached(
            ticket,
            "postgres",
            self.writes
                .pass(async move { store::poll(&pool, &request, &channel).await }),
        )
        .await?;
        if let PollOutcome::Granted { .. } = polled {
            self.split.wakers.forget(&ticket.request.token);
        }
        Ok(polled)
    }

    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.split.wait_for_change(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        if let Some(cancelled) = self.split.cancel_session(ticket).await {
            return cancelled;
        }
        let (pool, name, token) = (
            self.pool.clone(),
            ticket.request.name.clone(),
            ticket.request.token.clone(),
        );
        let cancel = async move { store::cancel(&pool, &name, &token).await };
        detached("postgres", self.writes.pass(cancel)).await
    }

    async fn renew_many(&self, leases: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let (pool, writes) = (self.pool.clone(), self.writes.clone());
        renew_split(self.split.sessions(), leases, ttl, move |tokens| {
            writes.pass(async move { store::renew(&pool, &tokens, ttl).await })
        })
        .await
    }

    async fn release(&self, lease: &Grant) -> Result<LeaseOutcome> {
        if let Some(released) = self.split.release_session(lease).await {
            return released;
        }
        let (pool, name, token) = (self.pool.clone(), lease.name.clone(), lease.token.clone());
        let release = async move { store::release(&pool, &name, &token).await };
        let was_held = detached("postgres", self.writes.pass(release)).await?;
        Ok(outcome(was_held))
    }

    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        if self.split.sessions().is_some() {
            return Err(adopt_unsupported(self.scheme(), self.capabilities()));
        }
        let (pool, token, request) = (
            self.pool.clone(),
            handed.token.clone(),
            ticket.request.clone(),
        );
        let adopt = async move { store::adopt(&pool, &token, fencing_token, &request).await };
        let adopted = detached("postgres", self.writes.pass(adopt)).await?;
        let adopted = adopted.ok_or_else(|| adopt_refused(&handed.name))?;
        Ok(PollOutcome::granted(adopted))
    }

    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        let (pool, writes) = (&self.pool, &self.writes);
        let (name, token) = (&grant.name, &grant.token);
        let lease = || {
            writes.pass(notes::write(
                pool,
                name,
                token,
                fencing_token,
                value,
                quiet_for,
            ))
        };
        let note = (fencing_token, value);
        self.split.write_note(grant, note, quiet_for, lease).await
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        notes::read(&self.pool, name).await
    }

    /// Grants in the lease table are broken; a session-mode advisory lock is refused with
    /// the `pg_terminate_backend` that ends its holder's connection.
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let (pool, owned) = (self.pool.clone(), name.to_owned());
        let force = async move { store::force_release(&pool, &owned, fencing_token).await };
        let force = detached("postgres", self.writes.pass(force));
        let ends = || async {
            let (pool, owned) = (self.pool.clone(), name.to_owned());
            let holders =
                async move { store::advisory_holders(&pool, &owned, fencing_token).await };
            let pids = detached("postgres", holders).await?;
            Ok(pids
                .iter()
                .map(|pid| format!("SELECT pg_terminate_backend({pid})"))
                .collect())
        };
        let inspect = || self.inspect(Some(name));
        self.split
            .force_release((name, fencing_token), inspect, force, ends)
            .await
    }

    async fn forget(&self, names: &[&str]) -> Result<usize> {
        fences::forget(&PgUpkeep(self.pool.clone()), &self.writes, names).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let (pool, name) = (self.pool.clone(), name.map(str::to_owned));
        let sessions = self.split.sessions().is_some();
        detached("postgres", async move {
            store::inspect(&pool, name.as_deref(), sessions).await
        })
        .await
    }

    /// Waits for this client's writes to the lease tables under way (a transaction holds
    /// the name's lock until it ends), and holds new ones back.
    async fn pause_writes(&self) -> WritesPaused {
        self.writes.pause().await
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for PostgresBackend {
    fn op(&self) -> &'static str {
        "SELECT 1"
    }

    async fn round(&self) -> Result<()> {
        let pool = self.pool.clone();
        detached("postgres", async move { store::floor_round(&pool).await }).await
    }
}
