use std::time::Duration;

use crate::acquire::{Attempt, Want, acquire};
use crate::backend::LockKind;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::MutexGuard;
use crate::options::LockOptions;
use crate::template::{Held, run_if_granted, run_under};

/// A distributed mutual-exclusion lock: at most one valid holder at a time.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::time::Duration;
/// use distlock_core::{Client, LockOptions};
///
/// let client = Client::connect("memory://").await?;
/// let mutex = client
///     .mutex("payments/settle")
///     .with_options(LockOptions::new().ttl(Duration::from_secs(10)));
/// let guard = mutex.lock().await?;
/// // ... work, passing guard.fencing_token() to the resource ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Mutex {
    client: Client,
    name: String,
    options: LockOptions,
}

impl Mutex {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let options = client.inner().defaults.clone();
        Mutex {
            client,
            name,
            options,
        }
    }

    /// This mutex with `options` used by [`lock`](Self::lock), [`try_lock`](Self::try_lock)
    /// and [`lock_timeout`](Self::lock_timeout).
    ///
    /// # Examples
    ///
    /// See [`Mutex`].
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
    /// assert_eq!(client.mutex("a").name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the lock is granted (or the options' `wait` deadline passes, which is an
    /// [`ErrorKind::Timeout`] error).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the request, and a grant made in the
    /// meantime is deleted in the background, so nothing is left queued or held.
    ///
    /// # Examples
    ///
    /// See [`Mutex`].
    pub async fn lock(&self) -> Result<MutexGuard> {
        self.lock_with(&self.options).await
    }

    /// One attempt: `Ok(None)` if the lock is held by someone else.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let mutex = client.mutex("a");
    /// let held = mutex.lock().await?;
    /// assert!(mutex.try_lock().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>> {
        acquire(&self.client, self.want(), &self.options, Attempt::Once).await
    }

    /// Runs `f` under the lock, acquired as [`lock`](Self::lock) acquires it: the lock
    /// template.
    ///
    /// The grant is released once `f` has finished, failed (its error comes back
    /// unchanged), panicked (the panic goes on after the release) or been dropped, and
    /// never while `f` runs. `f` runs inline, on the caller's task: it need not be `Send`
    /// or `'static`. If the lease is lost while `f` runs, the options' [`OnLost`](crate::OnLost)
    /// says what happens: by default `f` is dropped at its next `.await` and the call
    /// returns `LockLost`. Inside `f`, [`current_token`](crate::current_token) and
    /// [`assert_held`](crate::assert_held) work in every function it calls. Commit a
    /// transaction inside `f`, and pass the fencing token to its writes: a cancelled `f`
    /// can leave partial work, which is what fencing is for.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops `f` and releases the grant in the background (a wait not
    /// yet answered is withdrawn, as for [`lock`](Self::lock)).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let shipped = client
    ///     .mutex("orders/42")
    ///     .with_lock(async |held: &distlock_core::Held| {
    ///         // write, fenced with held.fencing_token()
    ///         Ok::<_, distlock_core::Error>(held.fencing_token() > 0)
    ///     })
    ///     .await?;
    /// assert!(shipped);
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let guard = self.lock().await?;
        run_under(guard, self.options.on_lost_value(), f).await
    }

    /// Runs `f` under the lock if it is free now, as [`with_lock`](Self::with_lock);
    /// `Ok(None)` at once, without running `f`, if it is held.
    ///
    /// # Cancel safety
    ///
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let mutex = client.mutex("nightly");
    /// let _held = mutex.lock().await?;
    /// let ran = mutex
    ///     .try_with_lock(async |_: &distlock_core::Held| Ok::<_, distlock_core::Error>(()))
    ///     .await?;
    /// assert_eq!(ran, None);
    /// # Ok(()) }
    /// ```
    pub async fn try_with_lock<T, E, F>(&self, f: F) -> std::result::Result<Option<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let granted = self.try_lock().await?;
        run_if_granted(granted, self.options.on_lost_value(), f).await
    }

    /// Waits at most `wait`; past it, an [`ErrorKind::Timeout`] error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let mutex = client.mutex("a");
    /// let held = mutex.lock().await?;
    /// let err = mutex.lock_timeout(Duration::from_millis(20)).await.unwrap_err();
    /// assert_eq!(err.kind(), distlock_core::ErrorKind::Timeout);
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard> {
        self.lock_with(&self.options.clone().wait(wait)).await
    }

    /// Waits with explicit options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use distlock_core::LockOptions;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let owner = client.new_owner();
    /// let mutex = client.mutex("a");
    /// let outer = mutex.lock_with(&LockOptions::new().reentrant(owner.clone())).await?;
    /// let inner = mutex.lock_with(&LockOptions::new().reentrant(owner)).await?;
    /// assert_eq!(outer.fencing_token(), inner.fencing_token());
    /// # Ok(()) }
    /// ```
    pub async fn lock_with(&self, options: &LockOptions) -> Result<MutexGuard> {
        acquire(&self.client, self.want(), options, Attempt::Wait)
            .await?
            .ok_or_else(|| Error::new(ErrorKind::Timeout, "lock was not granted"))
    }

    fn want(&self) -> Want<'_> {
        Want {
            name: &self.name,
            kind: LockKind::Mutex,
            permits: 1,
        }
    }
}
