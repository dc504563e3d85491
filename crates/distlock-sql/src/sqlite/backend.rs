//! The SQLite lease-table store.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LocalWakers, Note, PollOutcome, Ticket,
    WritesPaused, adopt_refused, async_trait, check_note,
};
use distlock_core::{Error, HolderInfo, LockState, Result};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::clock::LeaseClock;
use super::config::SqliteConfig;
use super::upkeep::SqliteUpkeep;
use super::wake::{Wake, WakeSocket};
use super::{SQLITE_CANTOPEN, db_error, notes, primary_code, store};
use crate::fences::{self, Sweeper};
use crate::lease_table::WAITER_LEASE;
use crate::tasks::{SqlTicket, WriteGate, detached, outcome, outcomes, poll_detached, settled};

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
    /// The clock the database's leases expire by.
    clock: LeaseClock,
    wakers: Arc<LocalWakers>,
    socket: WakeSocket,
    /// What every write of this client's passes (see [`Backend::pause_writes`]).
    writes: WriteGate,
    /// Deletes idle fencing counters while the client lives (stops when dropped).
    _sweeper: Sweeper,
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
        let bad_path = |what: &str, path: &std::path::Path| {
            Error::invalid(format!("{what}: {}", path.display()))
                .with_backend("sqlite")
                .with_operation("connect")
        };
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(bad_path(
                "the directory of the lock database does not exist",
                dir,
            ));
        }
        if config.path.is_dir() {
            return Err(bad_path(
                "the lock database must be a file, not a directory",
                &config.path,
            ));
        }
        let deadline = tokio::time::Instant::now() + config.busy_timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            match Self::try_open(&config).await {
                Ok((pool, clock)) => {
                    let wakers = Arc::new(LocalWakers::new());
                    let writes = WriteGate::default();
                    let upkeep = SqliteUpkeep {
                        pool: pool.clone(),
                        clock,
                    };
                    let sweeper = Sweeper::start(upkeep, Some(&writes), config.fence_ttl);
                    return Ok(SqliteBackend {
                        pool,
                        clock,
                        socket: WakeSocket::listen(wakers.clone()),
                        wakers,
                        writes,
                        _sweeper: sweeper,
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

    async fn try_open(config: &SqliteConfig) -> Result<(SqlitePool, LeaseClock)> {
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
        let busy_timeout = config.busy_timeout;
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(config.busy_timeout + Duration::from_secs(5))
            .after_connect(move |connection, _| {
                Box::pin(super::busy::install(connection, busy_timeout))
            })
            .connect_with(options)
            .await
            .map_err(|err| match &err {
                // SQLITE_CANTOPEN, or one of its extended codes: the path names nothing
                // this user may open or create.
                sqlx::Error::Database(db) if primary_code(db.as_ref()) == Some(SQLITE_CANTOPEN) => {
                    // SQLite says "cannot open" of a process out of file descriptors too:
                    // the path is blamed only if this process cannot open it either.
                    let opened = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(&config.path);
                    let path = config.path.display();
                    let err = match opened {
                        Err(why) => {
                            Error::invalid(format!("cannot open the lock database {path}: {db}"))
                                .with_source(why)
                        }
                        Ok(_) => Error::new(
                            distlock_core::ErrorKind::Backend,
                            format!(
                                "SQLite could not open the lock database {path} ({db}), though \
                                 the file opens: is this process out of file descriptors? \
                                 (raise `ulimit -n`)"
                            ),
                        ),
                    };
                    err.with_backend("sqlite").with_operation("connect")
                }
                _ => db_error("connect")(err),
            })?;
        let clock = store::prepare(&pool).await?;
        Ok((pool, clock))
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
}

#[async_trait]
impl Backend for SqliteBackend {
    fn scheme(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::full(!self.socket.name().is_empty());
        caps.adopt = true;
        caps
    }

    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        if ticket.request.wait {
            self.wakers.register(ticket);
        }
        Ok(())
    }

    /// A waiting request whose queue row was written less than a third of its lease ago
    /// polls read-only first.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let request = ticket.request.clone();
        let fresh = request.wait
            && ticket
                .state::<SqlTicket>()
                .and_then(|s| s.queued_at)
                .is_some_and(|at| at.elapsed() < WAITER_LEASE / 3);
        let (pool, clock, socket) = (self.pool.clone(), self.clock, self.socket.name().to_owned());
        let polled = poll_detached(
            ticket,
            "sqlite",
            self.writes
                .pass(async move { store::poll(&pool, clock, &request, fresh, &socket).await }),
        )
        .await?;
        match polled.outcome {
            PollOutcome::Granted { .. } => self.wakers.forget(&ticket.request.token),
            PollOutcome::Pending { .. } if ticket.request.wait && !fresh => {
                ticket.state_or_default::<SqlTicket>().queued_at =
                    Some(tokio::time::Instant::now());
            }
            _ => {}
        }
        self.wake(polled.wake);
        Ok(polled.outcome)
    }

    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.wakers.wait(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.wakers.forget(&ticket.request.token);
        settled(ticket).await;
        let (name, token) = (ticket.request.name.clone(), ticket.request.token.clone());
        let (pool, clock) = (self.pool.clone(), self.clock);
        let wake = detached(
            "sqlite",
            self.writes
                .pass(async move { store::cancel(&pool, clock, &name, &token).await }),
        )
        .await?;
        self.wake(wake);
        Ok(())
    }

    async fn renew_many(&self, leases: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let (pool, clock) = (self.pool.clone(), self.clock);
        let tokens: Vec<String> = leases.iter().map(|l| l.token.clone()).collect();
        let renewed = detached(
            "sqlite",
            self.writes
                .pass(async move { store::renew(&pool, clock, &tokens, ttl).await }),
        )
        .await?;
        Ok(outcomes(renewed))
    }

    async fn release(&self, lease: &Grant) -> Result<LeaseOutcome> {
        let (pool, clock) = (self.pool.clone(), self.clock);
        let (name, token) = (lease.name.clone(), lease.token.clone());
        let released = detached(
            "sqlite",
            self.writes
                .pass(async move { store::release(&pool, clock, &name, &token).await }),
        )
        .await?;
        self.wake(released.wake);
        Ok(outcome(released.was_held))
    }

    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        check_note(value)?;
        let (pool, clock) = (&self.pool, self.clock);
        let grant = (grant.name.as_str(), grant.token.as_str());
        let write = notes::write(pool, clock, grant, fencing_token, value, quiet_for);
        self.writes.pass(write).await
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        notes::read(&self.pool, self.clock, name).await
    }

    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        let (pool, clock) = (self.pool.clone(), self.clock);
        let (token, request) = (handed.token.clone(), ticket.request.clone());
        let adopt =
            async move { store::adopt(&pool, clock, &token, fencing_token, &request).await };
        let adopted = detached("sqlite", self.writes.pass(adopt)).await?;
        let adopted = adopted.ok_or_else(|| adopt_refused(&handed.name))?;
        Ok(PollOutcome::granted(adopted))
    }

    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let (pool, clock, name) = (self.pool.clone(), self.clock, name.to_owned());
        let broken = detached(
            "sqlite",
            self.writes.pass(async move {
                store::force_release(&pool, clock, &name, fencing_token).await
            }),
        )
        .await?;
        self.wake(broken.wake);
        Ok(broken.holders)
    }

    async fn forget(&self, names: &[&str]) -> Result<usize> {
        let upkeep = SqliteUpkeep {
            pool: self.pool.clone(),
            clock: self.clock,
        };
        fences::forget(&upkeep, &self.writes, names).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let (pool, clock, name) = (self.pool.clone(), self.clock, name.map(str::to_owned));
        detached("sqlite", async move {
            store::inspect(&pool, clock, name.as_deref()).await
        })
        .await
    }

    /// Waits for the statements under way (a SQLite writer holds the database file's one
    /// write lock, and keeps it while stopped) and holds new ones back.
    async fn pause_writes(&self) -> WritesPaused {
        self.writes.pause().await
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for SqliteBackend {
    fn op(&self) -> &'static str {
        "BEGIN IMMEDIATE; UPDATE; COMMIT"
    }

    async fn round(&self) -> Result<()> {
        let pool = self.pool.clone();
        detached(
            "sqlite",
            self.writes
                .pass(async move { store::floor_round(&pool).await }),
        )
        .await
    }
}
