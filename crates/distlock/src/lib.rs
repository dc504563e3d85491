#![doc = include_str!("../docs.md")]

use std::ops::Deref;
use std::sync::Once;

pub use distlock_core::{
    Capabilities, DEFAULT_OBSERVE_EVERY, DEFAULT_TTL, Election, Error, ErrorKind, Guard, HandOff,
    Health, Held, HeldUntil, HolderInfo, HolderMeta, Job, JobOutcome, JobStatus, LeaderInfo,
    Leadership, LockKind, LockOptions, LockState, MAX_IDENTITY_LEN, MAX_JOB_SPAN, MAX_NAME_LEN,
    MAX_OWNER_LEN, MAX_PROCLAIM_LEN, MAX_TTL, MIN_JOB_SPAN, MIN_OP_TIMEOUT, MIN_RENEW_EVERY,
    MIN_TTL, MemoryBackend, MultiGuard, MultiLock, Mutex, MutexGuard, OnLost, Owner, Permit,
    ReadGuard, Result, RunState, RwLock, Semaphore, Url, WaiterInfo, WriteGuard, WritesPaused,
    assert_held, current_token, parse_lock_url, random_id, redact_url, validate_identity,
    validate_job_span, validate_name, validate_proclamation,
};
pub use distlock_core::{backend, memory};

pub use distlock_macros::{job, locked, permits, read_locked, write_locked};

/// The etcd backend (`etcd://`).
#[cfg(feature = "etcd")]
pub use distlock_etcd as etcd;
/// The Redis backend (`redis://`).
#[cfg(feature = "redis")]
pub use distlock_redis as redis;
/// The SQL backends (`sqlite://`, `postgres://`, `mysql://`) and the fenced-write helper.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub use distlock_sql as sql;
/// The ZooKeeper backend (`zk://`).
#[cfg(feature = "zookeeper")]
pub use distlock_zookeeper as zookeeper;

/// Registers every backend enabled by this crate's features. [`Client::connect`] calls it;
/// call it yourself only before using [`distlock_core::Client`] directly.
///
/// # Examples
///
/// ```
/// distlock::install_backends();
/// ```
pub fn install_backends() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(feature = "redis")]
        distlock_redis::install();
        #[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
        distlock_sql::install();
        #[cfg(feature = "zookeeper")]
        distlock_zookeeper::install();
        #[cfg(feature = "etcd")]
        distlock_etcd::install();
    });
}

/// A handle to one lock backend, picked by URL scheme. Dereferences to
/// [`distlock_core::Client`], which has the primitives (`mutex`, `rwlock`, `semaphore`).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// let client = distlock::Client::connect("memory://").await?;
/// let permit = client.semaphore("exports", 3).acquire().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client(distlock_core::Client);

impl Client {
    /// Connects to the backend the URL names. An unknown scheme, a malformed URL or a bad
    /// parameter is an [`ErrorKind::InvalidInput`] error; an unreachable store is
    /// [`ErrorKind::Unavailable`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let err = distlock::Client::connect("not a url").await.unwrap_err();
    /// assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput);
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Client> {
        install_backends();
        distlock_core::Client::connect(url).await.map(Client)
    }

    /// A client over a backend built by hand (a custom backend, or a built-in one opened
    /// with options a URL cannot carry).
    ///
    /// # Examples
    ///
    /// ```
    /// let client = distlock::Client::with_backend(std::sync::Arc::new(distlock::MemoryBackend::new()));
    /// ```
    pub fn with_backend(backend: std::sync::Arc<dyn backend::Backend>) -> Client {
        install_backends();
        Client(distlock_core::Client::with_backend(backend))
    }

    /// [`connect`](Self::connect), with every primitive starting from `defaults` instead of
    /// [`LockOptions::default`]: the options a service wants for all its locks, set once.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
    /// use std::time::Duration;
    /// use distlock::{Client, LockOptions};
    ///
    /// let defaults = LockOptions::new().ttl(Duration::from_secs(10)).wait(Duration::from_millis(200));
    /// let client = Client::connect_with_defaults("memory://", defaults).await?;
    /// let guard = client.mutex("nightly-report").lock().await?;
    /// assert_eq!(guard.ttl(), Duration::from_secs(10));
    /// // A second lock of the held name waits 200 ms, not for ever.
    /// let again = client.mutex("nightly-report").lock().await.unwrap_err();
    /// assert_eq!(again.kind(), distlock::ErrorKind::Timeout);
    /// # Ok(()) }
    /// ```
    pub async fn connect_with_defaults(url: &str, defaults: LockOptions) -> Result<Client> {
        install_backends();
        distlock_core::Client::connect_with_defaults(url, defaults)
            .await
            .map(Client)
    }

    /// A client over a backend built by hand, with every primitive starting from
    /// `defaults`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use distlock::{Client, LockOptions, MemoryBackend};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
    /// let client = Client::with_defaults(
    ///     Arc::new(MemoryBackend::new()),
    ///     LockOptions::new().ttl(Duration::from_secs(5)),
    /// );
    /// let permit = client.semaphore("exports", 2).acquire().await?;
    /// assert_eq!(permit.ttl(), Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn with_defaults(
        backend: std::sync::Arc<dyn backend::Backend>,
        defaults: LockOptions,
    ) -> Client {
        install_backends();
        Client(distlock_core::Client::with_defaults(backend, defaults))
    }

    /// Wraps a core client (for example one built over a custom backend).
    ///
    /// # Examples
    ///
    /// ```
    /// let core = distlock_core::Client::with_backend(std::sync::Arc::new(distlock::MemoryBackend::new()));
    /// let client = distlock::Client::from_core(core);
    /// ```
    pub fn from_core(client: distlock_core::Client) -> Client {
        Client(client)
    }

    /// The core client inside.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
    /// let core: distlock_core::Client = distlock::Client::connect("memory://").await?.into_core();
    /// # Ok(()) }
    /// ```
    pub fn into_core(self) -> distlock_core::Client {
        self.0
    }
}

impl Deref for Client {
    type Target = distlock_core::Client;

    fn deref(&self) -> &distlock_core::Client {
        &self.0
    }
}

/// What the code `#[locked]` and its kin expand to calls; not for use by hand.
#[doc(hidden)]
pub mod __private {
    use std::sync::Arc;

    use distlock_core::Error;

    /// Whatever a `client = …` argument gives: a client, a reference to one, a shared one.
    pub trait AsClient {
        /// The core client.
        fn as_client(&self) -> &distlock_core::Client;
    }

    impl AsClient for distlock_core::Client {
        fn as_client(&self) -> &distlock_core::Client {
            self
        }
    }

    impl AsClient for super::Client {
        fn as_client(&self) -> &distlock_core::Client {
            self
        }
    }

    impl<T: AsClient + ?Sized> AsClient for &T {
        fn as_client(&self) -> &distlock_core::Client {
            (**self).as_client()
        }
    }

    impl<T: AsClient + ?Sized> AsClient for Arc<T> {
        fn as_client(&self) -> &distlock_core::Client {
            (**self).as_client()
        }
    }

    impl<T: AsClient + ?Sized> AsClient for Box<T> {
        fn as_client(&self) -> &distlock_core::Client {
            (**self).as_client()
        }
    }

    /// The core client of `client`.
    pub fn as_client<C: AsClient + ?Sized>(client: &C) -> &distlock_core::Client {
        client.as_client()
    }

    /// The error of `on_busy = "error"` for the busy lock(s) `name`.
    pub fn busy(name: &str) -> Error {
        Error::new(
            distlock_core::ErrorKind::Timeout,
            format!("`{name}` is held by someone else (on_busy = \"error\")"),
        )
    }
}
