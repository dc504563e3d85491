//! The client: one connection to a backend, the factory of primitives.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use crate::backend::{Backend, LockKind, WritesPaused};
use crate::cleanups::Cleanups;
use crate::closing::Closing;
use crate::error::{Error, ErrorKind, Result};
use crate::job::Job;
use crate::lease::LeaseCore;
use crate::options::LockOptions;
use crate::owner::{Owner, random_id};
use crate::primitives::{MultiLock, Mutex, RwLock, Semaphore};
use crate::renewals::Renewals;
use crate::watchdog::Watchdog;

mod store_calls;

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
    /// Its closes, which stop the bodies running under its grants first.
    pub(crate) closing: Arc<Closing>,
    reentrant: StdMutex<HashMap<ReentrantKey, Weak<LeaseCore>>>,
}

impl ClientInner {
    /// Runs a call to the backend for at most the operation timeout of the client's
    /// defaults: a store that hangs fails the call (`Unavailable`), never holds it.
    pub(crate) async fn bounded<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let limit = self.defaults.op_timeout_value();
        match tokio::time::timeout(limit, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::new(
                ErrorKind::Unavailable,
                format!("the backend did not answer within the operation timeout {limit:?}"),
            )
            .with_backend(self.backend.scheme())
            .with_operation(operation)
            .temporary()),
        }
    }

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
        let backend = crate::memory::connect_url(url).await?;
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
                closing: Closing::new(),
                reentrant: StdMutex::new(HashMap::new()),
            }),
        }
    }

    /// A job named `name`: a body that runs on one replica at a time (see [`Job`]). The
    /// name is a mutex's: a job and a mutex of one name exclude each other.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let outcome = client
    ///     .job("jobs/nightly-report")
    ///     .run(async |_| Ok::<_, distlock_core::Error>("sent"))
    ///     .await?;
    /// assert_eq!(outcome.ran(), Some("sent"));
    /// # Ok(()) }
    /// ```
    pub fn job(&self, name: impl Into<String>) -> Job {
        Job::new(self.clone(), name.into())
    }

    /// An election named `name`: candidates campaign for its mutex, and the holder leads
    /// with a term above every earlier leader's. The name is checked at the first
    /// campaign or read.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// assert!(leadership.term() >= 1);
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl Into<String>) -> crate::Election {
        crate::Election::new(self.clone(), name.into())
    }

    /// The run record of job `name`, as the store keeps it (`None` before its first run):
    /// its last run's state, start and end, its last success, holder and fencing token,
    /// and what is left of its `once_per` window. `Unsupported` where the backend keeps no
    /// run records.
    ///
    /// # Examples
    ///
    /// See [`JobStatus`](crate::JobStatus).
    pub async fn job_status(&self, name: &str) -> Result<Option<crate::JobStatus>> {
        crate::validate_name(name)?;
        self.inner.backend.check_name(name)?;
        crate::job::job_status(self.inner.backend.as_ref(), name).await
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

    /// Where lock `name` lives in the store, as the store's own tools show it (the key
    /// prefix `etcdctl get --prefix` lists, the node path `zkCli.sh ls` shows); `None`
    /// where the store's name for it is the lock's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.place_of("orders/42"), None);
    /// # Ok(()) }
    /// ```
    pub fn place_of(&self, name: &str) -> Option<String> {
        self.inner.backend.place_of(name)
    }

    /// The URL scheme of the backend behind this client (`redis`, `zk`, `sqlite`, ...).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.scheme(), "memory");
    /// # Ok(()) }
    /// ```
    pub fn scheme(&self) -> &'static str {
        self.inner.backend.scheme()
    }

    /// What the backend behind this client supports, and how its grants live: whether it
    /// has read/write locks, semaphores, fair queues, fencing tokens that survive restarts.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// let client = distlock_core::Client::connect("memory://").await?;
    /// assert!(client.capabilities().rwlock);
    /// # Ok(()) }
    /// ```
    pub fn capabilities(&self) -> crate::backend::Capabilities {
        self.inner.backend.capabilities()
    }

    /// Waits, at most `within`, for the clean-ups this client runs in the background: the
    /// cancel of an acquire that was dropped while it waited, the release of a guard that
    /// was dropped, and what the backend finishes on its own (a RedLock release's calls to
    /// its slower masters, see [`Backend::settle`](crate::backend::Backend::settle)). A
    /// program about to exit (on Ctrl-C, say) calls it after dropping what it
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
        let started = tokio::time::Instant::now();
        let cleaned = self.inner.cleanups.settle(within).await;
        let left = within.saturating_sub(started.elapsed());
        self.inner.backend.settle(left).await && cleaned
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
    pub async fn pause_writes(&self) -> WritesPaused {
        self.inner.backend.pause_writes().await
    }

    /// Releases every grant held through this client (the guards still around find them
    /// released, `Lost`) and waits for the clean-ups running in the background (a dropped
    /// guard's release, a dropped acquire's cancel), each bounded by its operation timeout.
    /// The closures running under its grants (a template's, a [`Job`]'s, an
    /// [`Election::run`](crate::Election::run)'s) are stopped first, at their next await,
    /// and their grants released only once they ended: they fail with `LockLost`, and an
    /// election does not campaign again. (Called from inside such a closure, `close` stops
    /// that closure too, and itself with it: call it outside.)
    /// Call it before a program returns from `main`: a release still in flight when the
    /// runtime shuts down is dropped with it, and its lock stays taken until its lease
    /// expires. The client stays usable.
    ///
    /// Errors: the first release that failed other than by the grant being gone already
    /// (`NotHeld` is not an error here), or `Unavailable` when a closure or a clean-up still
    /// ran after [`CLOSE_WITHIN`].
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
        // The bodies running under the grants first (a template's closure, a job's, an
        // election's): stopped, and ended, before their grants go.
        let bodies_ended = self.inner.closing.stop_bodies(CLOSE_WITHIN).await;
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
        if !bodies_ended {
            failed.get_or_insert(
                Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "a closure under a lock of this client did not end within {CLOSE_WITHIN:?} of being stopped (it never reached an await); its lock was released while it ran"
                    ),
                )
                .with_backend(self.inner.backend.scheme())
                .with_operation("close"),
            );
        }
        if !self.settle(CLOSE_WITHIN).await {
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

    pub(crate) fn inner(&self) -> &Arc<ClientInner> {
        &self.inner
    }
}

/// The backend behind `client`, for a backend's own hooks (a test downcasting it to reach
/// its fault switches) and tools that measure it. Re-exported as
/// [`backend::backend_of`](crate::backend::backend_of).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// let client = distlock_core::Client::connect("memory://").await?;
/// assert_eq!(distlock_core::backend::backend_of(&client).scheme(), "memory");
/// # Ok(()) }
/// ```
pub fn backend_of(client: &Client) -> &Arc<dyn Backend> {
    &client.inner.backend
}
