use crate::acquire::{Attempt, Want, acquire};
use crate::backend::LockKind;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Permit;
use crate::options::LockOptions;
use crate::template::{Held, run_if_granted, run_under};

/// A distributed counting semaphore: at most `permits` permits held at once. Each grant is
/// its own lease, so the permits of a crashed holder come back when its lease ends.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// let client = distlock_core::Client::connect("memory://").await?;
/// let exports = client.semaphore("exports", 2);
/// let a = exports.acquire().await?;
/// let b = exports.acquire().await?;
/// assert!(exports.try_acquire().await?.is_none());
/// drop(a);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    name: String,
    limit: u32,
    options: LockOptions,
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: String, limit: u32) -> Self {
        let options = client.inner().defaults.clone();
        Semaphore {
            client,
            name,
            limit,
            options,
        }
    }

    /// This semaphore with `options` used by the methods without `_with`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let s = client.semaphore("a", 3).with_options(distlock_core::LockOptions::new().fair(true));
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, options: LockOptions) -> Self {
        self.options = options;
        self
    }

    /// The semaphore's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.semaphore("a", 1).name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many permits the semaphore has in all.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.semaphore("a", 7).limit(), 7);
    /// # Ok(()) }
    /// ```
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Waits for one permit.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the request and deletes any grant made in
    /// the meantime.
    ///
    /// # Examples
    ///
    /// See [`Semaphore`].
    pub async fn acquire(&self) -> Result<Permit> {
        self.acquire_with(1, &self.options).await
    }

    /// Waits for `permits` permits, granted together as one lease.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let permits = client.semaphore("a", 5).acquire_many(3).await?;
    /// assert_eq!(permits.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn acquire_many(&self, permits: u32) -> Result<Permit> {
        self.acquire_with(permits, &self.options).await
    }

    /// Runs `f` holding `permits` permits, acquired as
    /// [`acquire_many`](Self::acquire_many) acquires them.
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
    /// let gpus = client.semaphore("gpus", 4);
    /// gpus.with_permits(2, async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(()))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_permits<T, E, F>(&self, permits: u32, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let guard = self.acquire_many(permits).await?;
        run_under(guard, self.options.on_lost_value(), f).await
    }

    /// Runs `f` holding `permits` permits if they are to be had now, as
    /// [`with_permits`](Self::with_permits); `Ok(None)` at once, without running `f`, if
    /// not.
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
    /// let gpus = client.semaphore("gpus", 4);
    /// let _three = gpus.acquire_many(3).await?;
    /// let ran = gpus
    ///     .try_with_permits(2, async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(()))
    ///     .await?;
    /// assert_eq!(ran, None);
    /// # Ok(()) }
    /// ```
    pub async fn try_with_permits<T, E, F>(
        &self,
        permits: u32,
        f: F,
    ) -> std::result::Result<Option<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let granted = self.try_acquire_many(permits).await?;
        run_if_granted(granted, self.options.on_lost_value(), f).await
    }

    /// One attempt at one permit.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// See [`Semaphore`].
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.try_acquire_many(1).await
    }

    /// One attempt at `permits` permits.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let s = client.semaphore("a", 2);
    /// assert!(s.try_acquire_many(3).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_many(&self, permits: u32) -> Result<Option<Permit>> {
        acquire(
            &self.client,
            self.want(permits),
            &self.options,
            Attempt::Once,
        )
        .await
    }

    /// Waits for `permits` permits with explicit options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let p = client.semaphore("a", 2).acquire_with(2, &distlock_core::LockOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, permits: u32, options: &LockOptions) -> Result<Permit> {
        acquire(&self.client, self.want(permits), options, Attempt::Wait)
            .await?
            .ok_or_else(|| Error::new(ErrorKind::Timeout, "permits were not granted"))
    }

    fn want(&self, permits: u32) -> Want<'_> {
        Want {
            name: &self.name,
            kind: LockKind::Semaphore { limit: self.limit },
            permits,
        }
    }
}
