use crate::acquire::{Attempt, Want, acquire};
use crate::backend::LockKind;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{ReadGuard, WriteGuard};
use crate::options::LockOptions;
use crate::template::{Held, run_if_granted, run_under};

/// A distributed read/write lock: many readers or one writer. A waiting writer blocks new
/// readers, so a steady stream of readers cannot starve it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// let client = distlock_core::Client::connect("memory://").await?;
/// let catalog = client.rwlock("catalog");
/// let r1 = catalog.read().await?;
/// let r2 = catalog.read().await?;
/// assert!(catalog.try_write().await?.is_none());
/// drop((r1, r2));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RwLock {
    client: Client,
    name: String,
    options: LockOptions,
}

impl RwLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let options = client.inner().defaults.clone();
        RwLock {
            client,
            name,
            options,
        }
    }

    /// This lock with `options` used by the methods without `_with`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let lock = client.rwlock("a").with_options(distlock_core::LockOptions::new().fair(true));
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, options: LockOptions) -> Self {
        self.options = options;
        self
    }

    /// The lock's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.rwlock("a").name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for a shared hold.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the request and deletes any grant made in
    /// the meantime.
    ///
    /// # Examples
    ///
    /// See [`RwLock`].
    pub async fn read(&self) -> Result<ReadGuard> {
        self.read_with(&self.options).await
    }

    /// Waits for the exclusive hold.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let w = client.rwlock("a").write().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<WriteGuard> {
        self.write_with(&self.options).await
    }

    /// Runs `f` under a read lock, acquired as [`read`](Self::read) acquires it.
    ///
    /// The grant is released once `f` has finished, failed, panicked or been dropped, and
    /// never while `f` runs; a lost lease stops `f` as the options'
    /// [`OnLost`](crate::OnLost) says: all as [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let schema = client.rwlock("schema");
    /// let version = schema
    ///     .with_read(async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(7))
    ///     .await?;
    /// schema
    ///     .with_write(async |held: &distlock_core::Held| {
    ///         assert!(held.fencing_token() > 0);
    ///         Ok::<_, distlock_core::Error>(version + 1)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_read<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let guard = self.read().await?;
        run_under(guard, self.options.on_lost_value(), f).await
    }

    /// Runs `f` under the write lock, acquired as [`write`](Self::write) acquires it.
    ///
    /// The grant is released once `f` has finished, failed, panicked or been dropped, and
    /// never while `f` runs; a lost lease stops `f` as the options'
    /// [`OnLost`](crate::OnLost) says: all as [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Examples
    ///
    /// See [`with_read`](Self::with_read).
    pub async fn with_write<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let guard = self.write().await?;
        run_under(guard, self.options.on_lost_value(), f).await
    }

    /// Runs `f` under a read grant if one is to be had now, as [`with_read`](Self::with_read);
    /// `Ok(None)` at once, without running `f`, if a writer holds the lock or waits for it.
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let schema = client.rwlock("schema");
    /// let _writing = schema.write().await?;
    /// let read = schema
    ///     .try_with_read(async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(7))
    ///     .await?;
    /// assert_eq!(read, None);
    /// # Ok(()) }
    /// ```
    pub async fn try_with_read<T, E, F>(&self, f: F) -> std::result::Result<Option<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let granted = self.try_read().await?;
        run_if_granted(granted, self.options.on_lost_value(), f).await
    }

    /// Runs `f` under the write grant if the lock is free now, as
    /// [`with_write`](Self::with_write); `Ok(None)` at once, without running `f`, if not.
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`](crate::Mutex::with_lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let schema = client.rwlock("schema");
    /// let _reading = schema.read().await?;
    /// let wrote = schema
    ///     .try_with_write(async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(()))
    ///     .await?;
    /// assert_eq!(wrote, None);
    /// # Ok(()) }
    /// ```
    pub async fn try_with_write<T, E, F>(&self, f: F) -> std::result::Result<Option<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let granted = self.try_write().await?;
        run_if_granted(granted, self.options.on_lost_value(), f).await
    }

    /// One attempt at a shared hold.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert!(client.rwlock("a").try_read().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        acquire(
            &self.client,
            self.want(LockKind::Read),
            &self.options,
            Attempt::Once,
        )
        .await
    }

    /// One attempt at the exclusive hold.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// # Examples
    ///
    /// See [`RwLock`].
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        acquire(
            &self.client,
            self.want(LockKind::Write),
            &self.options,
            Attempt::Once,
        )
        .await
    }

    /// Waits for a shared hold with explicit options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let r = client.rwlock("a").read_with(&distlock_core::LockOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_with(&self, options: &LockOptions) -> Result<ReadGuard> {
        self.wait_for(LockKind::Read, options).await
    }

    /// Waits for the exclusive hold with explicit options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let w = client.rwlock("a").write_with(&distlock_core::LockOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_with(&self, options: &LockOptions) -> Result<WriteGuard> {
        self.wait_for(LockKind::Write, options).await
    }

    async fn wait_for(&self, kind: LockKind, options: &LockOptions) -> Result<ReadGuard> {
        acquire(&self.client, self.want(kind), options, Attempt::Wait)
            .await?
            .ok_or_else(|| Error::new(ErrorKind::Timeout, "lock was not granted"))
    }

    fn want(&self, kind: LockKind) -> Want<'_> {
        Want {
            name: &self.name,
            kind,
            permits: 1,
        }
    }
}
