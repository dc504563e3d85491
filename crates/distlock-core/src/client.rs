//! The client: one connection to a backend, the factory of primitives.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use crate::backend::{Backend, HolderInfo, LockKind, LockState};
use crate::cleanups::Cleanups;
use crate::error::{Error, ErrorKind, Result};
use crate::lease::LeaseCore;
use crate::name::check_name_for;
use crate::options::LockOptions;
use crate::owner::{Owner, random_id};
use crate::primitives::{MultiLock, Mutex, RwLock, Semaphore};
use crate::registry;
use crate::renewals::Renewals;
use crate::watchdog::Watchdog;

/// Where reentrant grants are found again: name, kind and owner.
type ReentrantKey = (String, &'static str, Owner);

pub(crate) struct ClientInner {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) id: String,
    pub(crate) defaults: LockOptions,
    pub(crate) renewals: Renewals,
    pub(crate) watchdog: Watchdog,
    /// The clean-ups running in the background.
    pub(crate) cleanups: Arc<Cleanups>,
    reentrant: StdMutex<HashMap<ReentrantKey, Weak<LeaseCore>>>,
}

impl ClientInner {
    /// The grant `owner` holds of `name` through this client, with one more hold on it;
    /// a `LockLost` error if that grant is held but no longer valid; `None` if there is none.
    pub(crate) fn find_reentrant(
        &self,
        name: &str,
        kind: LockKind,
        owner: &Owner,
    ) -> Option<Result<Arc<LeaseCore>>> {
        let map = self.reentrant.lock().unwrap_or_else(|p| p.into_inner());
        let key = (name.to_owned(), kind.as_str(), owner.clone());
        let lease = map.get(&key).and_then(Weak::upgrade)?;
        lease.try_add_hold().map(|held| held.map(|()| lease))
    }

    pub(crate) fn remember_reentrant(&self, lease: &Arc<LeaseCore>) {
        let mut map = self.reentrant.lock().unwrap_or_else(|p| p.into_inner());
        let key = (
            lease.handle.name.clone(),
            lease.kind.as_str(),
            lease.owner.clone(),
        );
        map.insert(key, Arc::downgrade(lease));
    }

    pub(crate) fn forget_reentrant(&self, lease: &LeaseCore) {
        let mut map = self.reentrant.lock().unwrap_or_else(|p| p.into_inner());
        let key = (
            lease.handle.name.clone(),
            lease.kind.as_str(),
            lease.owner.clone(),
        );
        if map
            .get(&key)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), lease))
        {
            map.remove(&key);
        }
    }
}

/// How long [`Client::close`], and the drop of a client's last handle, wait for the
/// clean-ups running in the background: the longest default operation timeout, so each of
/// them can end.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::CLOSE_WITHIN, std::time::Duration::from_secs(5));
/// ```
pub const CLOSE_WITHIN: Duration = crate::options::MAX_DEFAULT_OP_TIMEOUT;

/// What the handles a user holds share: when the last goes (a program returning from an
/// async `main`, whose locals drop first) outside the runtime's tasks, the releases they
/// left running in the background are seen to: on a multi-thread runtime waited for, on a
/// current-thread one (whose one thread is this one) made on a thread of their own, since
/// the runtime will run none of them again. The withdrawals of requests given up are not
/// waited for here: a wait that timed out against a store that hangs would hold the
/// program past its deadline, and an entry left behind expires on its own;
/// [`Client::settle`] waits for them.
struct UserHandle {
    cleanups: Arc<Cleanups>,
    backend: Arc<dyn Backend>,
    /// The URL the client connected to, for the releases made elsewhere (see below).
    url: Option<String>,
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        if self.cleanups.releases_done() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // In a task, waiting would hold up the runtime's other tasks, the releases among
        // them; the program is not ending here.
        if tokio::task::try_id().is_some() {
            return;
        }
        match runtime.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => {
                self.cleanups.wait_releases(CLOSE_WITHIN);
            }
            // Its one thread is here, and runs no task again before the runtime ends: the
            // releases are made on a thread of their own.
            _ => self.cleanups.stranded.release_elsewhere(
                &self.backend,
                self.url.as_deref(),
                CLOSE_WITHIN,
            ),
        }
    }
}

/// A handle to one lock backend. Cheap to clone; clones share the connection.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::Client;
///
/// let client = Client::connect("memory://").await?;
/// let guard = client.mutex("orders/42").lock().await?;
/// println!("fencing token {}", guard.fencing_token());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
    /// Shared by the handles a user holds (clients, mutexes, …; not guards), so the last
    /// one's drop can wait for the releases it leaves in flight.
    _user: Arc<UserHandle>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("backend", &self.inner.backend)
            .finish()
    }
}

impl Client {
    /// Connects to the backend the URL's scheme names, among the installed ones
    /// (`memory://` always; others through [`register`](crate::backend::register), which the
    /// `distlock` facade does for its enabled features).
    ///
    /// An unknown scheme or a malformed URL is an
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use distlock_core::{Client, ErrorKind};
    ///
    /// assert!(Client::connect("memory://").await.is_ok());
    /// let err = Client::connect("carrier-pigeon://loft").await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with_defaults(url, LockOptions::default()).await
    }

    /// [`connect`](Self::connect), with primitives that start from `defaults` instead of
    /// [`LockOptions::default`] (a TTL, a wait deadline, fairness for every lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// use distlock_core::{Client, LockOptions};
    ///
    /// let client =
    ///     Client::connect_with_defaults("memory://", LockOptions::new().ttl(Duration::from_secs(5)))
    ///         .await?;
    /// let guard = client.mutex("reports").lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with_defaults(url: &str, defaults: LockOptions) -> Result<Client> {
        let backend = registry::connect(url).await?;
        Ok(Client::build(backend, defaults, Some(url.to_owned())))
    }

    /// A client over a backend built by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let client = distlock_core::Client::with_backend(Arc::new(distlock_core::MemoryBackend::new()));
    /// ```
    pub fn with_backend(backend: Arc<dyn Backend>) -> Client {
        Client::with_defaults(backend, LockOptions::default())
    }

    /// A client whose primitives start from `defaults` instead of [`LockOptions::default`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use distlock_core::{Client, LockOptions, MemoryBackend};
    /// let client = Client::with_defaults(
    ///     Arc::new(MemoryBackend::new()),
    ///     LockOptions::new().ttl(Duration::from_secs(5)),
    /// );
    /// ```
    pub fn with_defaults(backend: Arc<dyn Backend>, defaults: LockOptions) -> Client {
        Client::build(backend, defaults, None)
    }

    /// A client over `backend`, connected to `url` if it was.
    fn build(backend: Arc<dyn Backend>, defaults: LockOptions, url: Option<String>) -> Client {
        let cleanups = Arc::<Cleanups>::default();
        Client {
            _user: Arc::new(UserHandle {
                cleanups: cleanups.clone(),
                backend: backend.clone(),
                url,
            }),
            inner: Arc::new(ClientInner {
                renewals: Renewals::new(backend.clone()),
                watchdog: Watchdog::new(backend.session(), backend.loss_news()),
                backend,
                id: random_id(),
                defaults,
                cleanups: cleanups.clone(),
                reentrant: StdMutex::new(HashMap::new()),
            }),
        }
    }

    /// A mutex named `name`. The name is checked when the lock is first acquired.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let mutex = client.mutex("inventory/sku-1");
    /// let guard = mutex.lock().await?;
    /// # Ok(()) }
    /// ```
    pub fn mutex(&self, name: impl Into<String>) -> Mutex {
        Mutex::new(self.clone(), name.into())
    }

    /// A read/write lock named `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let config = client.rwlock("config");
    /// let r1 = config.read().await?;
    /// let r2 = config.read().await?;
    /// # Ok(()) }
    /// ```
    pub fn rwlock(&self, name: impl Into<String>) -> RwLock {
        RwLock::new(self.clone(), name.into())
    }

    /// A semaphore named `name` with `permits` permits in all.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let pool = client.semaphore("db-connections", 10);
    /// let permit = pool.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore::new(self.clone(), name.into(), permits)
    }

    /// Several mutexes to take together, all or nothing, in name order.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let both = client.multi_lock(["stock/sku-1", "stock/sku-2"]).lock().await?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLock::new(self.clone(), names.into_iter().map(Into::into).collect())
    }

    /// A fresh owner under this client's id.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let owner = client.new_owner();
    /// assert!(owner.as_str().starts_with(client.id()));
    /// # Ok(()) }
    /// ```
    pub fn new_owner(&self) -> Owner {
        Owner::under(&self.inner.id)
    }

    /// This client's random id, the prefix of the owners it makes.
    ///
    /// # Examples
    ///
    /// See [`Client::new_owner`].
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The backend behind this client.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.backend().scheme(), "memory");
    /// # Ok(()) }
    /// ```
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// Waits, at most `within`, for the clean-ups this client runs in the background: the
    /// cancel of an acquire that was dropped while it waited, the release of a guard that
    /// was dropped. A program about to exit (on Ctrl-C, say) calls it after dropping what it
    /// waited for, so it leaves no queue entry or grant behind to delay the next holder
    /// until it expires. True if none is left running.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// let client = distlock_core::Client::connect("memory://settle").await?;
    /// let held = client.mutex("a").lock().await?;
    /// // Give up a wait halfway, as on Ctrl-C: its cancel runs in the background.
    /// let _ = tokio::time::timeout(Duration::from_millis(10), client.mutex("a").lock()).await;
    /// assert!(client.settle(Duration::from_secs(1)).await);
    /// assert_eq!(client.status(Some("a")).await?[0].waiters.len(), 0);
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self, within: Duration) -> bool {
        self.inner.cleanups.settle(within).await
    }

    /// Waits until none of this client's writes that others would wait on is under way,
    /// and holds new ones back until the answer is dropped: take it before the process
    /// stops itself (on SIGTSTP, as `distlock run` does), so that it does not stop in the
    /// middle of one (see [`Backend::pause_writes`]). The client's operations, renewals
    /// too, wait for its drop: await none of them while holding it, and drop it as soon
    /// as the process runs again.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// let paused = client.pause_writes().await;
    /// // ... stop the process here (SIGSTOP to itself) ...
    /// drop(paused);
    /// # Ok(()) }
    /// ```
    pub async fn pause_writes(&self) -> crate::backend::WritesPaused {
        self.inner.backend.pause_writes().await
    }

    /// Releases every grant held through this client (the guards still around find them
    /// released, `Lost`) and waits for the clean-ups running in the background (a dropped
    /// guard's release, a dropped acquire's cancel), each bounded by its operation timeout.
    /// Call it before a program returns from `main`: a release still in flight when the
    /// runtime shuts down is dropped with it, and its lock stays taken until its lease
    /// expires. The client stays usable.
    ///
    /// Errors: the first release that failed other than by the grant being gone already
    /// (`NotHeld` is not an error here), or `Unavailable` when clean-ups still ran after
    /// [`CLOSE_WITHIN`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("nightly").lock().await?;
    /// drop(guard); // released in the background...
    /// client.close().await?; // ...and that release is done now
    /// assert!(client.mutex("nightly").try_lock().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        // All at once, each on a task of its own: a store that does not answer costs one
        // operation timeout, not one per grant, and a close given up half-way leaves the
        // releases running (counted as clean-ups).
        let releases: Vec<_> = self
            .inner
            .watchdog
            .held()
            .into_iter()
            .map(|grant| {
                let cleanup = self.inner.cleanups.start_release();
                tokio::spawn(async move {
                    let _cleanup = cleanup;
                    grant.release_all_holds().await
                })
            })
            .collect();
        let mut failed = None;
        for release in releases {
            match release.await {
                Ok(Err(err)) if err.kind() != ErrorKind::NotHeld => {
                    failed.get_or_insert(err);
                }
                Err(err) => {
                    failed.get_or_insert(
                        Error::new(ErrorKind::Backend, format!("a release task failed: {err}"))
                            .with_operation("close"),
                    );
                }
                _ => {}
            }
        }
        if !self.inner.cleanups.settle(CLOSE_WITHIN).await {
            failed.get_or_insert(
                Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "background releases and cancels were still running after {CLOSE_WITHIN:?}; their locks end with their leases"
                    ),
                )
                .with_backend(self.inner.backend.scheme())
                .with_operation("close"),
            );
        }
        failed.map_or(Ok(()), Err)
    }

    /// The state of lock `name`, or of every lock with holders or waiters, asked within the
    /// operation timeout of the client's defaults (an `Unavailable` error past it).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let _guard = client.mutex("status-demo").lock().await?;
    /// let states = client.status(Some("status-demo")).await?;
    /// assert_eq!(states[0].holders.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        if let Some(name) = name {
            check_name_for(self.inner.backend.as_ref(), name)?;
        }
        self.bounded("status", self.inner.backend.inspect(name))
            .await
    }

    /// Runs `f` under the mutex `name`, acquired with the client's defaults: the lock
    /// template, as [`Mutex::with_lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let report = client
    ///     .with_lock("reports/daily", async |held: &distlock_core::Held| {
    ///         Ok::<_, distlock_core::Error>(format!("written under token {}", held.fencing_token()))
    ///     })
    ///     .await?;
    /// assert!(report.starts_with("written"));
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T, E, F>(&self, name: &str, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&crate::Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        self.mutex(name).with_lock(f).await
    }

    /// Breaks a stuck lock: deletes the grant of `name` whose fencing token is
    /// `fencing_token` (every current grant when `None`), whoever holds it, after bumping
    /// the name's fencing counter so that the broken holder's late writes are older than
    /// every later grant's. Waiters are granted as after a release; the broken holder's
    /// guard goes `Lost` when its client learns of it (its next renewal, or at once where
    /// the store tells). Answers the grants broken (empty: none matched, say because the
    /// holder released first). Asked within the operation timeout of the client's
    /// defaults. A store that cannot break another connection's grant (a session-mode
    /// PostgreSQL or MySQL lock) refuses with `Unsupported`, naming the server's own tool.
    ///
    /// Pass the token `status` showed: the grant then broken is the one seen, never a
    /// later holder's.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let stuck = client.mutex("nightly").lock().await?;
    /// let broken = client.force_release("nightly", Some(stuck.fencing_token())).await?;
    /// assert_eq!(broken[0].fencing_token, stuck.fencing_token());
    /// assert!(client.mutex("nightly").try_lock().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        check_name_for(self.inner.backend.as_ref(), name)?;
        self.bounded(
            "force_release",
            self.inner.backend.force_release(name, fencing_token),
        )
        .await
    }

    /// Runs a call to the backend for at most the operation timeout of the client's
    /// defaults: a store that hangs fails the call (`Unavailable`), never holds it.
    async fn bounded<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let limit = self.inner.defaults.op_timeout_value();
        match tokio::time::timeout(limit, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::new(
                ErrorKind::Unavailable,
                format!("the backend did not answer within the operation timeout {limit:?}"),
            )
            .with_backend(self.inner.backend.scheme())
            .with_operation(operation)
            .temporary()),
        }
    }

    /// Lets the store drop the fencing counters of `names`, locks this program is done
    /// with (a service that locks `orders/<id>` can forget an order once it is shipped,
    /// rather than leave its counter for `fence_ttl`). A counter goes only if it is at
    /// least a second below the server's clock (a minute on RedLock, whose masters' clocks
    /// may differ): on a SQL database, one idle that long; on Redis, whose counters count
    /// up from the clock when first made, one made that long ago. A lock used again is
    /// seeded anew from the clock, above every token it gave, and holders and waiters are
    /// untouched, so forgetting a name in use is safe.
    ///
    /// What that needs: the server's clock never steps back by more than that second (for
    /// the names forgotten; `fence_ttl`'s sweep asks it only within `fence_ttl`), and no
    /// client of a distlock that counted from 1 (PostgreSQL's lease mode before counters
    /// took the clock's floor) uses the same tables. Answers how many counters went (on
    /// RedLock, the most one master dropped), within the operation timeout of the client's
    /// defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// client.mutex("orders/42").lock().await?.release().await?;
    /// // The memory backend keeps nothing between grants.
    /// assert_eq!(client.forget(["orders/42"]).await?, 0);
    /// # Ok(()) }
    /// ```
    pub async fn forget<I, S>(&self, names: I) -> Result<usize>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names: Vec<S> = names.into_iter().collect();
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        for name in &names {
            check_name_for(self.inner.backend.as_ref(), name)?;
        }
        self.bounded("forget", self.inner.backend.forget(&names))
            .await
    }

    pub(crate) fn inner(&self) -> &Arc<ClientInner> {
        &self.inner
    }
}
