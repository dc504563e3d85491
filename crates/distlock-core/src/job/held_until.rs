//! A grant released no sooner than a given instant: kept by the store where its lease can
//! be, by a task of this client where it lives by session.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::lease::LeaseCore;
use crate::options::{MAX_TTL, MIN_TTL};

/// Where a grant given to [`Guard::release_at`] is kept until its instant.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::time::{Duration, Instant};
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let guard = client.mutex("reports/daily").lock().await?;
/// let kept = guard.release_at(Instant::now() + Duration::from_secs(60)).await?;
/// // The memory store's grants have leases: the store keeps this one for a minute.
/// assert!(kept.in_store());
/// assert!(client.mutex("reports/daily").try_lock().await?.is_none());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping it leaves a grant kept by this client to its task; await `wait` to keep the process until the grant ends"]
pub struct HeldUntil {
    until: std::time::Instant,
    in_store: bool,
    task: Option<JoinHandle<()>>,
}

impl HeldUntil {
    /// Whether the store itself keeps the grant until [`until`](Self::until), so the
    /// process may end at once: true where grants outlive their clients
    /// ([`Capabilities::detachable`](crate::Capabilities::detachable)), false where they
    /// live by this client's session or connection (ZooKeeper, etcd, SQL session mode),
    /// whose grant a task of this client holds until then and releases.
    ///
    /// # Examples
    ///
    /// See [`HeldUntil`].
    pub fn in_store(&self) -> bool {
        self.in_store
    }

    /// When the grant is released, on this process's monotonic clock.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::{Duration, Instant};
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let at = Instant::now() + Duration::from_secs(5);
    /// let kept = client.mutex("a").lock().await?.release_at(at).await?;
    /// assert_eq!(kept.until(), at);
    /// # Ok(()) }
    /// ```
    pub fn until(&self) -> std::time::Instant {
        self.until
    }

    /// Waits until this client no longer holds the grant: at once when the store keeps it,
    /// else until the task that holds it has released it (at [`until`](Self::until), or
    /// sooner if the grant was lost or the client closed).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the task to hold and release the grant.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::{Duration, Instant};
    /// # let client = distlock_core::Client::connect("memory://?liveness=session").await?;
    /// let guard = client.mutex("a").lock().await?;
    /// let kept = guard.release_at(Instant::now() + Duration::from_millis(50)).await?;
    /// assert!(!kept.in_store());
    /// kept.wait().await;
    /// assert!(client.mutex("a").try_lock().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn wait(self) {
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

impl Guard {
    /// Releases the grant no sooner than `at`, so that nobody else takes the lock before
    /// then — a job's "at least this long between two starts". Where the grant outlives its
    /// client ([`Capabilities::detachable`](crate::Capabilities::detachable)), one last renewal makes the store keep it until `at` (measured by the
    /// store, from this call) and this client forgets it: the process may end. Where it
    /// lives by this client's session, a task of the client holds it until `at` and then
    /// releases it (a connection's or session's grant has nothing the store would keep):
    /// the process must live until then ([`HeldUntil::wait`]), or the store
    /// frees it with the session. Past `at` already, it releases now.
    ///
    /// A failed last renewal leaves the grant to the lease it had, which ends sooner than
    /// `at`: the error says so. A reentrant grant that has other holds is refused with
    /// `InvalidInput`: release those first.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while the last renewal is in flight leaves the grant to the
    /// store: it lapses with the lease the renewal gave it, or the one it had.
    ///
    /// # Examples
    ///
    /// See [`HeldUntil`].
    pub async fn release_at(self, at: std::time::Instant) -> Result<HeldUntil> {
        let lease = self.lease().clone();
        if lease.holds() > 1 {
            return Err(Error::invalid(format!(
                "lock `{}` has other holds of this reentrant grant; release_at needs its last",
                lease.handle.name
            )));
        }
        let deadline = Instant::from_std(at);
        let left = deadline.saturating_duration_since(Instant::now());
        let kept = |in_store, task| HeldUntil {
            until: at,
            in_store,
            task,
        };
        if left.is_zero() {
            self.release().await?;
            return Ok(kept(false, None));
        }
        if !in_store(&lease) || left > MAX_TTL {
            let task = tokio::spawn(hold_until(self, deadline));
            return Ok(kept(false, Some(task)));
        }
        if left < MIN_TTL {
            tokio::time::sleep_until(deadline).await;
            self.release().await?;
            return Ok(kept(false, None));
        }
        self.forget().leave_in_store(deadline).await?;
        Ok(kept(true, None))
    }
}

/// Whether the store can keep `lease`'s grant after this client lets go of it: a grant
/// with a lease of its own, on a backend whose grants outlive their clients.
fn in_store(lease: &LeaseCore) -> bool {
    lease.session.is_none() && lease.client.backend.capabilities().detachable
}

/// Holds `guard` until `deadline` and releases it then, or gives it to the store once what
/// is left fits a lease; ends sooner if the grant is lost.
async fn hold_until(guard: Guard, deadline: Instant) {
    let lease = guard.lease().clone();
    let stored = in_store(&lease);
    let hand_over = match stored {
        false => deadline,
        true => deadline.checked_sub(MAX_TTL).unwrap_or(deadline),
    };
    tokio::select! {
        () = tokio::time::sleep_until(hand_over) => {}
        () = lease.lost() => {}
    }
    let name = lease.handle.name.clone();
    let left = deadline.saturating_duration_since(Instant::now());
    // Counted as a clean-up from before the release takes the grant out of those
    // `Client::close` releases until it ended: `close` and `Client::settle` wait for it
    // (a program that exits after them leaves no release in flight).
    let _ending = lease.client.cleanups.start_release();
    let ended = match stored {
        true if left >= MIN_TTL && lease.health().is_valid() => {
            guard.forget().leave_in_store(deadline).await
        }
        _ => guard.release().await,
    };
    if let Err(err) = ended
        && !matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost)
    {
        tracing::warn!(lock = %name, error = %err, left = ?left.max(Duration::ZERO), "ending a grant kept until an instant failed; it ends with its lease or session");
    }
}
