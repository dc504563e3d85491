//! A distlock backend for the processes of one machine, on `flock(2)`, written with nothing
//! but [`distlock::backend`]: the worked example for a team adding its own store, and the
//! proof that the backend-author API is enough. It passes the conformance suites its
//! capabilities select (`tests/conformance.rs`).
//!
//! `flock:///var/lib/app/locks` names a directory. Its file `locks.json` holds every lock:
//! the name's fencing counter and its holder, with a lease that ends at a wall-clock
//! instant (every process of one machine reads the same clock). Each operation takes an
//! exclusive `flock` on the directory's `.store` file, reads the locks, changes them, and
//! writes them back through a temporary file renamed over the old one, so a process killed
//! halfway leaves the last whole state. A holder that dies is freed when its lease ends.
//!
//! Mutexes only, waiters polling (no queue, no fairness; each waiter noted for `distlock
//! status` while it polls), fencing tokens that survive every process, and breaking a stuck
//! holder. Names are never forgotten: the file grows with every name ever locked. A token is
//! above the name's last one and above the wall clock in microseconds, so one given after
//! the file was lost or deleted is still above every earlier one (as long as the clock does
//! not step back).
//!
//! Leases end by the wall clock, which every process of the machine reads alike: a clock
//! stepped forward (by hand, or a large NTP correction) ends them early, while their holders,
//! which count by their monotonic clocks, still hold. Keep the machine's clock slewed, not
//! stepped, or use the SQLite backend, whose leases count by the boot's monotonic clock.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! distlock_flock_example::install();
//! let client = distlock::Client::connect(&format!("flock://{}", dir.path().display())).await?;
//! let guard = client.mutex("reports/nightly").lock().await?;
//! assert!(guard.fencing_token() > 0);
//! guard.release().await?;
//! # Ok(()) }
//! ```

mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use distlock::backend::{
    Backend, Capabilities, Connector, Error, ErrorKind, Grant, HolderInfo, LeaseOutcome, LockState,
    PollOutcome, Result, Ticket, Url, UrlParams, WAITER_REFRESH, WritesPaused, async_trait,
    register,
};

use store::{Holder, Store};

/// Registers the `flock://` scheme, so [`distlock::Client::connect`] reaches this backend.
///
/// # Examples
///
/// See the [crate documentation](crate).
pub fn install() {
    register(Arc::new(FlockConnector));
}

/// Builds a [`FlockBackend`] from a `flock:///directory` URL.
#[derive(Debug)]
struct FlockConnector;

#[async_trait]
impl Connector for FlockConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["flock"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        UrlParams::of(url)?.finish()?;
        if url.host_str().is_some_and(|host| !host.is_empty()) {
            return Err(Error::invalid(
                "a flock URL names a directory of this machine: flock:///var/lib/app/locks",
            ));
        }
        let dir = PathBuf::from(distlock::backend::url_path(url).map_err(Error::invalid)?);
        if !dir.is_absolute() || dir.parent().is_none() {
            return Err(Error::invalid(
                "a flock URL names a directory of its own by its path: flock:///var/lib/app/locks",
            ));
        }
        Ok(Arc::new(FlockBackend::open(dir).await?))
    }
}

/// The locks kept in one directory, shared by every process of the machine that opens it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// use std::sync::Arc;
/// use distlock_flock_example::FlockBackend;
///
/// let dir = tempfile::tempdir().unwrap();
/// let backend = FlockBackend::open(dir.path().to_owned()).await?;
/// let client = distlock::Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("a").lock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FlockBackend {
    store: Arc<Store>,
    /// One operation of this client at a time, held by the blocking thread that runs it
    /// until it ends (so a cancel never overtakes the poll it withdraws, even one whose
    /// caller gave up), and by [`Backend::pause_writes`].
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl FlockBackend {
    /// Opens the lock directory `dir`, creating it and its files if need be.
    ///
    /// # Examples
    ///
    /// See [`FlockBackend`].
    pub async fn open(dir: PathBuf) -> Result<Self> {
        let store = tokio::task::spawn_blocking(move || Store::open(dir))
            .await
            .map_err(|err| Error::new(ErrorKind::Backend, err.to_string()))??;
        Ok(FlockBackend {
            store: Arc::new(store),
            turn: Arc::default(),
        })
    }

    /// Runs `change` on the locks under the directory's lock, on a blocking thread, in
    /// this client's turn.
    async fn with_locks<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut store::Locks, u64) -> T + Send + 'static,
    ) -> Result<T> {
        let store = self.store.clone();
        let turn = self.turn.clone().lock_owned().await;
        tokio::task::spawn_blocking(move || {
            let answer = store.change(change);
            drop(turn);
            answer
        })
        .await
        .map_err(|err| Error::new(ErrorKind::Backend, err.to_string()))?
    }
}

#[async_trait]
impl Backend for FlockBackend {
    fn scheme(&self) -> &'static str {
        "flock"
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::lease();
        caps.fencing = true;
        caps.durable_fencing = true;
        caps.force_release = true;
        caps
    }

    /// Grants the ticket if the name has no holder whose lease runs; otherwise notes it
    /// among the waiters (kept for two refresh periods unless it polls again) and asks to
    /// be polled again when that lease ends. A refused attempt that does not wait leaves
    /// nothing behind.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let request = ticket.request.clone();
        self.with_locks(move |locks, now_ms| {
            let lock = locks.entry(request.name.clone()).or_default();
            let held = lock
                .holder
                .as_ref()
                .map(|h| (h.token == request.token, h.expires_at_ms, h.fencing_token));
            match held {
                // Granted by an earlier poll of this ticket: its lease counts from now.
                Some((true, _, token)) => {
                    lock.holder = Some(Holder::of(&request, token, now_ms));
                    PollOutcome::granted(token)
                }
                Some((false, expires_at_ms, _)) if expires_at_ms > now_ms => {
                    if request.wait {
                        lock.wait(&request, now_ms, now_ms + 2 * millis(WAITER_REFRESH));
                    }
                    PollOutcome::pending(Some(Duration::from_millis(expires_at_ms - now_ms)))
                }
                _ => {
                    // Above every token given, and above the clock in microseconds: a lost
                    // or deleted file starts the counters above every token it gave.
                    lock.fence = (lock.fence + 1).max(now_ms.saturating_mul(1000));
                    lock.holder = Some(Holder::of(&request, lock.fence, now_ms));
                    lock.stop_waiting(&request.token);
                    PollOutcome::granted(lock.fence)
                }
            }
        })
        .await
    }

    /// Nothing wakes a waiter: it sleeps until the core's next poll.
    async fn wait_for_change(
        &self,
        _ticket: &mut Ticket,
        backstop: Option<Duration>,
    ) -> Result<()> {
        tokio::time::sleep(backstop.unwrap_or(Duration::from_millis(50))).await;
        Ok(())
    }

    /// Deletes the ticket's waiter entry and a grant made under its token, if any.
    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        let (name, token) = (ticket.request.name.clone(), ticket.request.token.clone());
        self.with_locks(move |locks, _| {
            if let Some(lock) = locks.get_mut(&name) {
                lock.holder.take_if(|holder| holder.token == token);
                lock.stop_waiting(&token);
            }
        })
        .await
    }

    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let grants: Vec<(String, String)> = grants
            .iter()
            .map(|grant| (grant.name.clone(), grant.token.clone()))
            .collect();
        self.with_locks(move |locks, now_ms| {
            grants
                .iter()
                .map(|(name, token)| {
                    let held = locks
                        .get_mut(name)
                        .and_then(|lock| lock.holder.as_mut())
                        .filter(|holder| holder.token == *token && holder.expires_at_ms > now_ms);
                    match held {
                        Some(holder) => {
                            holder.expires_at_ms = now_ms + millis(ttl);
                            LeaseOutcome::Done
                        }
                        None => LeaseOutcome::NotHeld,
                    }
                })
                .collect()
        })
        .await
    }

    /// Deletes the grant if it is ours; a lease that ran out is not held any more.
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let (name, token) = (grant.name.clone(), grant.token.clone());
        self.with_locks(move |locks, now_ms| {
            let ours = locks
                .get_mut(&name)
                .and_then(|lock| lock.holder.take_if(|holder| holder.token == token));
            match ours {
                Some(holder) if holder.expires_at_ms > now_ms => LeaseOutcome::Done,
                _ => LeaseOutcome::NotHeld,
            }
        })
        .await
    }

    /// Holds this client's operations back: a process stopped inside one would keep the
    /// directory's lock, and every process of the machine would wait for it.
    async fn pause_writes(&self) -> WritesPaused {
        WritesPaused::holding(self.turn.clone().lock_owned().await)
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let name = name.map(str::to_owned);
        self.with_locks(move |locks, now_ms| {
            let shown = |(lock_name, lock): (&String, &store::Lock)| {
                let mut state = LockState::new(lock_name.clone());
                state.last_fencing_token = lock.fence;
                state.holders = lock
                    .holder
                    .iter()
                    .filter(|holder| holder.expires_at_ms > now_ms)
                    .map(|holder| holder.info(now_ms))
                    .collect();
                state.waiters = lock.waiting(now_ms);
                state
            };
            match &name {
                Some(name) => {
                    let state = locks.get_key_value(name).map(shown);
                    vec![state.unwrap_or_else(|| LockState::new(name.clone()))]
                }
                None => locks
                    .iter()
                    .map(shown)
                    .filter(|state| !state.holders.is_empty() || !state.waiters.is_empty())
                    .collect(),
            }
        })
        .await
    }

    /// Bumps the name's counter, then removes the holder (the one with `fencing_token`,
    /// or whichever holds it).
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let name = name.to_owned();
        self.with_locks(move |locks, now_ms| {
            let Some(lock) = locks.get_mut(&name) else {
                return Vec::new();
            };
            let broken = lock.holder.take_if(|holder| {
                holder.expires_at_ms > now_ms
                    && fencing_token.is_none_or(|token| token == holder.fencing_token)
            });
            if broken.is_some() {
                lock.fence = (lock.fence + 1).max(now_ms.saturating_mul(1000));
            }
            broken
                .map(|holder| holder.info(now_ms))
                .into_iter()
                .collect()
        })
        .await
    }
}

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
