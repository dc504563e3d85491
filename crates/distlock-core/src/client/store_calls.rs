//! What a client asks of its store beyond taking locks: the state of locks, forgetting
//! their counters, breaking a stuck one, and the lock template by name; each bounded by the
//! operation timeout of the client's defaults.

use crate::backend::{HolderInfo, LockState};
use crate::error::{Error, Result};
use crate::name::check_name_for;
use crate::template::Held;

use super::Client;

impl Client {
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
    /// template, as [`Mutex::with_lock`](crate::Mutex::with_lock).
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
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
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
    pub(crate) async fn bounded<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.inner.bounded(operation, call).await
    }

    /// Lets the store drop the fencing counters of `names`, locks this program is done
    /// with (a service that locks `orders/<id>` can forget an order once it is shipped,
    /// rather than leave its counter for `fence_ttl`). A counter goes only if it is at
    /// least a second below the server's clock: on a SQL database, one idle that long.
    /// Redis (and RedLock) keeps no counter per name — names share their cluster slot's —
    /// so there is nothing to forget there, and the answer is 0. A lock used again is
    /// seeded anew from the clock, above every token it gave, and holders and waiters are
    /// untouched, so forgetting a name in use is safe.
    ///
    /// What that needs: the server's clock never steps back by more than that second (for
    /// the names forgotten; `fence_ttl`'s sweep asks it only within `fence_ttl`), and no
    /// client of a distlock that counted from 1 (PostgreSQL's lease mode before counters
    /// took the clock's floor) uses the same tables. Answers how many counters went, within
    /// the operation timeout of the client's defaults.
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
}
