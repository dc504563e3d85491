//! Guards: proof of a grant, with its fencing token, safe deadline and health.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::LockKind;
use crate::error::Result;
use crate::lease::{Health, LeaseCore};
use crate::owner::Owner;

/// A held grant: of a [`Mutex`](crate::Mutex), an [`RwLock`](crate::RwLock) (read or
/// write) or permits of a [`Semaphore`](crate::Semaphore).
///
/// While the guard lives, a watchdog renews the lease (unless disabled). Dropping the guard
/// releases the grant in the background; [`Guard::release`] releases it now and reports
/// whether it was still ours. The guard is `'static` and can move between tasks.
///
/// **Release on drop is not immediate**: the background release runs on the runtime, and
/// dies with it. A program about to end calls [`Client::close`](crate::Client::close),
/// which releases what is still held and waits for releases in flight; on a multi-thread
/// runtime the drop of the client's last handle outside a task (the end of
/// `#[tokio::main]`) waits for them too.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::{Client, Health};
///
/// let client = Client::connect("memory://").await?;
/// let guard = client.mutex("reports/daily").lock().await?;
/// assert_eq!(guard.health(), Health::Held);
/// assert!(guard.fencing_token() >= 1);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct Guard {
    lease: Arc<LeaseCore>,
    released: bool,
}

/// The guard of a [`Mutex`](crate::Mutex).
pub type MutexGuard = Guard;
/// A shared hold of an [`RwLock`](crate::RwLock).
pub type ReadGuard = Guard;
/// The exclusive hold of an [`RwLock`](crate::RwLock).
pub type WriteGuard = Guard;
/// Permits of a [`Semaphore`](crate::Semaphore).
pub type Permit = Guard;

impl Guard {
    pub(crate) fn new(lease: Arc<LeaseCore>) -> Self {
        Guard {
            lease,
            released: false,
        }
    }

    pub(crate) fn lease(&self) -> &Arc<LeaseCore> {
        &self.lease
    }

    /// Takes the grant out of the guard without releasing it: the caller settles it.
    pub(crate) fn forget(mut self) -> Arc<LeaseCore> {
        self.released = true;
        Arc::clone(&self.lease)
    }

    /// The lock's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// assert_eq!(guard.name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.lease.handle.name
    }

    /// What is held: mutex, read, write, or semaphore permits.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.rwlock("a").read().await?;
    /// assert_eq!(guard.kind(), distlock_core::LockKind::Read);
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> LockKind {
        self.lease.kind
    }

    /// How many semaphore permits this guard holds (1 for locks).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let permit = client.semaphore("pool", 4).acquire_many(2).await?;
    /// assert_eq!(permit.permits(), 2);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.lease.permits
    }

    /// The fencing token: strictly greater than every token granted before for this name.
    /// Pass it to the resource you guard and have the resource reject older tokens.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let first = client.mutex("a").lock().await?;
    /// let t1 = first.fencing_token();
    /// first.release().await?;
    /// let second = client.mutex("a").lock().await?;
    /// assert!(second.fencing_token() > t1);
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.lease.fencing_token
    }

    /// The moment, on this process's monotonic clock, until which the lease is surely
    /// valid: the start of the last successful grant or renewal request plus the TTL, less
    /// clock drift and a margin. Do not act under the lock after it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// assert!(guard.safe_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn safe_until(&self) -> Instant {
        self.lease.status().safe_until.into_std()
    }

    /// How the lease stands now.
    ///
    /// # Examples
    ///
    /// See [`Guard`].
    pub fn health(&self) -> Health {
        self.lease.health()
    }

    /// A future that resolves when the lease is lost (or released). It owns what it needs,
    /// so it can be kept in a `select!` beside the guarded work.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future has no effect on the lease.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// tokio::select! {
    ///     _ = guard.lost() => eprintln!("lost the lock, stopping"),
    ///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.lease.lost()
    }

    /// Renews the lease now (the watchdog does this on its own unless disabled), waiting at
    /// most the [operation timeout](crate::LockOptions::op_timeout) for the backend.
    ///
    /// Returns an [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) error if the backend no
    /// longer has the grant, and [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) if the
    /// guard was already lost (once lost, a guard never becomes held again); the guard is
    /// then `Lost`. A grant that lives by its client's session has nothing of its own to
    /// renew: this says whether it still stands.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// guard.renew().await?;
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self) -> Result<()> {
        self.lease.renew_once(None).await
    }

    /// Releases the grant now. Returns an [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld)
    /// error if it was already gone (expired or taken over). For a reentrant guard this gives
    /// up one hold; the grant goes with the last.
    ///
    /// # Examples
    ///
    /// See [`Guard`].
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.lease.release_hold().await
    }

    /// The owner the grant is recorded under.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// assert!(!guard.owner().as_str().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &Owner {
        &self.lease.owner
    }

    /// The lease length the grant was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// assert_eq!(guard.ttl(), distlock_core::DEFAULT_TTL);
    /// # Ok(()) }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.lease.ttl
    }
}

/// The backend's handle of `guard`'s grant, for a backend's resource-side helpers (etcd's
/// "this guard still holds" transaction condition reads its key from it). Re-exported as
/// [`backend::grant_of`](crate::backend::grant_of).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let guard = client.mutex("a").lock().await?;
/// assert_eq!(distlock_core::backend::grant_of(&guard).name, "a");
/// # Ok(()) }
/// ```
pub fn grant_of(guard: &Guard) -> &crate::backend::Grant {
    &guard.lease.handle
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.released {
            self.lease.release_hold_in_background();
        }
    }
}
