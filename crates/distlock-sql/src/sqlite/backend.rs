//! The SQLite lease-table store.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::{
    Backend, Capabilities, Error, LeaseKey, LeaseOutcome, LocalWakers, LockRequest, LockState,
    PollOutcome, Result, Ticket, async_trait,
};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::config::SqliteConfig;
use super::refreshes::Refreshes;
use super::wake::{Wake, WakeSocket};
use super::{db_error, store};
use crate::tasks::{InFlight, detached, outcome, outcomes};

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
    wakers: Arc<LocalWakers>,
    socket: WakeSocket,
    queued: Refreshes,
    in_flight: Arc<InFlight>,
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
                    let wakers = Arc::new(LocalWakers::new());
                    return Ok(SqliteBackend {
                        pool,
                        socket: WakeSocket::listen(wakers.clone()),
                        wakers,
                        queued: Refreshes::default(),
                        in_flight: Arc::default(),
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
        store::prepare(&pool).await?;
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

    fn wake(&self, wake: Option<Wake>) {
        if let Some(wake) = wake {
            self.socket.send(&wake, &self.wakers);
        }
    }

    fn forget_ticket(&self, token: &str) {
        self.wakers.forget(token);
        self.queued.forget(token);
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn scheme(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::full(!self.socket.name().is_empty())
    }

    async fn enqueue(&self, request: LockRequest) -> Result<Ticket> {
        let ticket = Ticket::new(request, None);
        if ticket.request.wait {
            self.wakers.register(&ticket);
        }
        Ok(ticket)
    }

    async fn poll(&self, ticket: &Ticket) -> Result<PollOutcome> {
        let request = ticket.request.clone();
        let fresh = request.wait && self.queued.fresh(&request.token);
        let (pool, socket) = (self.pool.clone(), self.socket.name().to_owned());
        let token = request.token.clone();
        let polled = self
            .in_flight
            .poll("sqlite", &token, async move {
                store::poll(&pool, &request, fresh, &socket).await
            })
            .await?;
        let request = &ticket.request;
        match polled.outcome {
            PollOutcome::Granted { .. } => self.forget_ticket(&request.token),
            PollOutcome::Pending { .. } if request.wait && !fresh => {
                self.queued.refreshed(&request.token)
            }
            PollOutcome::Pending { .. } => {}
        }
        self.wake(polled.wake);
        Ok(polled.outcome)
    }

    async fn wait_for_change(&self, ticket: &Ticket, backstop: Duration) -> Result<()> {
        self.wakers.wait(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &Ticket) -> Result<()> {
        let (name, token) = (ticket.request.name.clone(), ticket.request.token.clone());
        self.forget_ticket(&token);
        self.in_flight.settled(&token).await;
        let pool = self.pool.clone();
        let wake = detached("sqlite", async move {
            store::cancel(&pool, &name, &token).await
        })
        .await?;
        self.wake(wake);
        Ok(())
    }

    async fn renew(&self, lease: &LeaseKey, ttl: Duration) -> Result<LeaseOutcome> {
        let renewed = self.renew_many(std::slice::from_ref(lease), ttl).await?;
        Ok(renewed.into_iter().next().unwrap_or(LeaseOutcome::NotHeld))
    }

    async fn renew_many(&self, leases: &[LeaseKey], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let pool = self.pool.clone();
        let tokens: Vec<String> = leases.iter().map(|l| l.token.clone()).collect();
        let renewed = detached(
            "sqlite",
            async move { store::renew(&pool, &tokens, ttl).await },
        )
        .await?;
        Ok(outcomes(renewed))
    }

    async fn release(&self, lease: &LeaseKey) -> Result<LeaseOutcome> {
        let (pool, name, token) = (self.pool.clone(), lease.name.clone(), lease.token.clone());
        let released = detached("sqlite", async move {
            store::release(&pool, &name, &token).await
        })
        .await?;
        self.wake(released.wake);
        Ok(outcome(released.was_held))
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let (pool, name) = (self.pool.clone(), name.map(str::to_owned));
        detached("sqlite", async move {
            store::inspect(&pool, name.as_deref()).await
        })
        .await
    }

    fn floor_op(&self) -> &'static str {
        "BEGIN IMMEDIATE; UPDATE; COMMIT"
    }

    async fn floor_round(&self) -> Result<()> {
        let pool = self.pool.clone();
        detached("sqlite", async move { store::floor_round(&pool).await }).await
    }
}
