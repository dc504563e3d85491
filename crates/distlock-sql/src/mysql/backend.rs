//! The MySQL/MariaDB lock store: session-mode `GET_LOCK` locks and the lease table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LocalWakers, Note, PollOutcome, Ticket,
    WritesPaused, adopt_refused, adopt_unsupported, async_trait,
};
use distlock_core::{HolderInfo, LockKind, LockState, Result, random_id};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{Executor, MySqlPool};

use super::config::{Mode, MysqlConfig};
use super::schema;
use super::session::MysqlSessions;
use super::store::{self, Wake};
use super::upkeep::MysqlUpkeep;
use super::{db_error, notes};
use crate::fences::{self, Sweeper};
use crate::session::renew_split;
use crate::split::Split;
use crate::tasks::{SqlTicket, WriteGate, detached, first_connection, outcome, poll_detached};

/// A lock store on one MySQL or MariaDB database.
///
/// In session mode, mutexes are `GET_LOCK` locks, each held by a connection of its own;
/// read/write locks and semaphores are leases. In lease mode, every grant is a row of the
/// shared lease table with a TTL from the database's clock.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_sql::mysql::{MysqlBackend, MysqlConfig};
///
/// let url = distlock_core::Url::parse("mysql://app:pw@127.0.0.1/app?mode=lease").unwrap();
/// let backend = MysqlBackend::open(MysqlConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// # Ok(()) }
/// ```
pub struct MysqlBackend {
    pool: MySqlPool,
    channel: String,
    redacted: String,
    split: Split<MysqlSessions>,
    /// What every write of this client's to the lease tables passes (see
    /// [`Backend::pause_writes`]).
    writes: WriteGate,
    /// Deletes idle fencing counters while the client lives (stops when dropped).
    _sweeper: Sweeper,
}

impl std::fmt::Debug for MysqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBackend")
            .field("url", &self.redacted)
            .finish()
    }
}

impl Drop for MysqlBackend {
    fn drop(&mut self) {
        channels().remove(&self.channel);
    }
}

/// The wake-up channels of this process's clients: a release wakes the next waiter at
/// once when that waiter's client lives in the same process.
fn channels() -> std::sync::MutexGuard<'static, HashMap<String, Weak<LocalWakers>>> {
    static CHANNELS: OnceLock<Mutex<HashMap<String, Weak<LocalWakers>>>> = OnceLock::new();
    CHANNELS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Wakes the waiter `wake` names, if its client is in this process.
fn wake(wake: Option<Wake>) {
    let Some(Wake { token, address }) = wake else {
        return;
    };
    let wakers = channels().get(&address).and_then(Weak::upgrade);
    if let Some(wakers) = wakers {
        wakers.wake(&token);
    }
}

impl MysqlBackend {
    /// Connects, creates the tables if missing.
    ///
    /// # Examples
    ///
    /// See [`MysqlBackend`].
    pub async fn open(config: MysqlConfig) -> Result<Self> {
        first_connection("mysql", &config.options, config.connect_timeout).await?;
        let pool = MySqlPoolOptions::new()
            .max_connections(config.pool)
            .acquire_timeout(config.connect_timeout)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    // Every change is serialised by its key's counter row; reading
                    // committed rows takes no gap locks, so changes to other keys never
                    // wait for or deadlock with it.
                    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await
                        .map(drop)
                })
            })
            .connect_with(config.options.clone())
            .await
            .map_err(db_error("connect"))?;
        schema::prepare(&pool).await?;
        let sweeper = Sweeper::start(MysqlUpkeep(pool.clone()), None, config.fence_ttl);
        let sessions = match config.mode {
            Mode::Lease => None,
            Mode::Session => Some(MysqlSessions::new(&config.options, pool.clone())),
        };
        // Mutexes are `GET_LOCK` locks; read/write locks and semaphores are leases.
        let split = Split::new(sessions, |kind| kind == LockKind::Mutex);
        let channel = random_id();
        channels().insert(channel.clone(), Arc::downgrade(&split.wakers));
        Ok(MysqlBackend {
            pool,
            channel,
            redacted: config.redacted,
            split,
            writes: WriteGate::default(),
            _sweeper: sweeper,
        })
    }

    /// The connection pool, e.g. to keep the application's own tables in the same
    /// database.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(backend: &distlock_sql::mysql::MysqlBackend) {
    /// let pool = backend.pool();
    /// # }
    /// ```
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }
}

#[async_trait]
impl Backend for MysqlBackend {
    fn scheme(&self) -> &'static str {
        "mysql"
    }

    /// In session mode, a session lock cannot be broken by another connection.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::full(false);
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

    /// A lease request with a row in the queue looks before it locks.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        if let Some(polled) = self.split.poll_session(ticket).await {
            return polled;
        }
        let request = ticket.request.clone();
        let (pool, channel) = (self.pool.clone(), self.channel.clone());
        let sessions = self.split.sessions().is_some();
        let queued = ticket
            .state::<SqlTicket>()
            .is_some_and(|s| s.queued_at.is_some());
        let poll = async move {
            if queued && let Some(waiting) = store::peek(&pool, &request).await? {
                return Ok((waiting, None));
            }
            store::poll(&pool, &request, &channel, sessions).await
        };
        let (polled, next) = poll_detached(ticket, "mysql", self.writes.pass(poll)).await?;
        wake(next);
        match polled {
            PollOutcome::Granted { .. } => self.split.wakers.forget(&ticket.request.token),
            PollOutcome::Pending { .. } if ticket.request.wait && !queued => {
                ticket.state_or_default::<SqlTicket>().queued_at =
                    Some(tokio::time::Instant::now());
            }
            _ => {}
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
        let next = detached("mysql", self.writes.pass(cancel)).await?;
        wake(next);
        Ok(())
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
        let (was_held, next) = detached("mysql", self.writes.pass(release)).await?;
        wake(next);
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
        let adopted = detached("mysql", self.writes.pass(adopt)).await?;
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

    /// Grants in the lease table are broken; a session-mode `GET_LOCK` lock is refused
    /// with the `KILL` that ends its holder's connection.
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let (pool, owned) = (self.pool.clone(), name.to_owned());
        let force = async move { store::force_release(&pool, &owned, fencing_token).await };
        let force = async {
            let (broken, next) = detached("mysql", self.writes.pass(force)).await?;
            wake(next);
            Ok(broken)
        };
        let ends = || async {
            let (pool, owned) = (self.pool.clone(), name.to_owned());
            let holder = detached("mysql", async move {
                store::session_holder(&pool, &owned).await
            })
            .await?;
            Ok(holder.iter().map(|id| format!("KILL {id}")).collect())
        };
        let inspect = || self.inspect(Some(name));
        self.split
            .force_release((name, fencing_token), inspect, force, ends)
            .await
    }

    async fn forget(&self, names: &[&str]) -> Result<usize> {
        fences::forget(&MysqlUpkeep(self.pool.clone()), &self.writes, names).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let (pool, name) = (self.pool.clone(), name.map(str::to_owned));
        let sessions = self.split.sessions().is_some();
        detached("mysql", async move {
            store::inspect(&pool, name.as_deref(), sessions).await
        })
        .await
    }

    /// Waits for this client's writes to the lease tables under way (a transaction holds
    /// its rows' locks until it ends), and holds new ones back.
    async fn pause_writes(&self) -> WritesPaused {
        self.writes.pause().await
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for MysqlBackend {
    fn op(&self) -> &'static str {
        "SELECT 1"
    }

    async fn round(&self) -> Result<()> {
        let pool = self.pool.clone();
        detached("mysql", async move { store::floor_round(&pool).await }).await
    }
}
