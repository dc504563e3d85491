use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::lease::Health;
use crate::options::LockOptions;
use crate::template::{Held, run_under_all};

/// Several mutexes taken together, all or nothing. Names are taken in one fixed order
/// (sorted), so two multi-locks over overlapping names never deadlock; if any cannot be
/// had, those already taken are released before the call returns.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// let client = distlock_core::Client::connect("memory://").await?;
/// let transfer = client.multi_lock(["accounts/alice", "accounts/bob"]);
/// let both = transfer.lock().await?;
/// assert_eq!(both.guards().len(), 2);
/// both.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLock {
    client: Client,
    names: Vec<String>,
    /// A name given twice: every acquire refuses it (taking it twice would deadlock, and
    /// taking it once would hand back fewer guards than names).
    repeated: Option<String>,
    options: LockOptions,
}

impl MultiLock {
    pub(crate) fn new(client: Client, mut names: Vec<String>) -> Self {
        names.sort();
        let repeated = names
            .windows(2)
            .find(|w| w[0] == w[1])
            .map(|w| w[0].clone());
        names.dedup();
        let options = client.inner().defaults.clone();
        MultiLock {
            client,
            names,
            repeated,
            options,
        }
    }

    /// This multi-lock with `options` (the `wait` deadline covers all names together).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let m = client.multi_lock(["a", "b"]).with_options(distlock_core::LockOptions::new().fair(true));
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, options: LockOptions) -> Self {
        self.options = options;
        self
    }

    /// The names, in the order they are taken.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.multi_lock(["b", "a"]).names(), ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Waits until every name is held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases the names already taken (in the
    /// background) and withdraws the pending request.
    ///
    /// # Examples
    ///
    /// See [`MultiLock`].
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.lock_with(&self.options).await
    }

    /// Runs `f` holding every name, acquired as [`lock`](Self::lock) acquires them: `f`
    /// gets each name's grant, in name order. They are released once `f` has finished,
    /// failed, panicked or been dropped, and never while it runs; losing any of them stops
    /// `f` as the options' [`OnLost`](crate::OnLost) says: all as
    /// [`Mutex::with_lock`](crate::Mutex::with_lock).
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
    /// let moved = client
    ///     .multi_lock(["accounts/b", "accounts/a"])
    ///     .with_all(async |held: &[distlock_core::Held]| {
    ///         assert_eq!(held[0].name(), "accounts/a");
    ///         Ok::<_, distlock_core::Error>(held.len())
    ///     })
    ///     .await?;
    /// assert_eq!(moved, 2);
    /// # Ok(()) }
    /// ```
    pub async fn with_all<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnOnce(&[Held]) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let all = self.lock().await?;
        run_under_all(all.into_guards(), self.options.on_lost_value(), f).await
    }

    /// Runs `f` holding every lock if all are free now, as [`with_all`](Self::with_all);
    /// `Ok(None)` at once, without running `f` and holding none, if any is held.
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
    /// let _b = client.mutex("accounts/b").lock().await?;
    /// let moved = client
    ///     .multi_lock(["accounts/a", "accounts/b"])
    ///     .try_with_all(async |held: &[distlock_core::Held]| Ok::<_, distlock_core::Error>(held.len()))
    ///     .await?;
    /// assert_eq!(moved, None);
    /// # Ok(()) }
    /// ```
    pub async fn try_with_all<T, E, F>(&self, f: F) -> std::result::Result<Option<T>, E>
    where
        F: AsyncFnOnce(&[Held]) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        match self.try_lock().await? {
            Some(all) => run_under_all(all.into_guards(), self.options.on_lost_value(), f)
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// Waits at most `wait` for all names; past it, an
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error.
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
    /// let held = client.mutex("b").lock().await?;
    /// let err = client
    ///     .multi_lock(["a", "b"])
    ///     .lock_timeout(std::time::Duration::from_millis(20))
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), distlock_core::ErrorKind::Timeout);
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, wait: Duration) -> Result<MultiGuard> {
        self.lock_with(&self.options.clone().wait(wait)).await
    }

    /// One attempt at every name: `Ok(None)`, with nothing left held, if any is taken.
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
    /// let held = client.mutex("b").lock().await?;
    /// assert!(client.multi_lock(["a", "b"]).try_lock().await?.is_none());
    /// assert!(client.mutex("a").try_lock().await?.is_some(), "a was not kept");
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.check()?;
        let mut guards = Vec::with_capacity(self.names.len());
        for name in &self.names {
            let mutex = self.client.mutex(name).with_options(self.options.clone());
            match mutex.try_lock().await {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => {
                    release_all(guards).await;
                    return Ok(None);
                }
                Err(err) => {
                    release_all(guards).await;
                    return Err(err);
                }
            }
        }
        Ok(Some(MultiGuard { guards }))
    }

    /// Waits for every name with explicit options; `wait` bounds the whole acquisition.
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
    /// let all = client.multi_lock(["a", "b"]).lock_with(&distlock_core::LockOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_with(&self, options: &LockOptions) -> Result<MultiGuard> {
        self.check()?;
        // A wait past the clock's range is no deadline.
        let deadline = options.wait.and_then(|w| Instant::now().checked_add(w));
        let mut guards = Vec::with_capacity(self.names.len());
        for name in &self.names {
            let mut each = options.clone();
            if let Some(deadline) = deadline {
                each = each.wait(deadline.saturating_duration_since(Instant::now()));
            }
            match self.client.mutex(name).lock_with(&each).await {
                Ok(guard) => guards.push(guard),
                Err(err) => {
                    release_all(guards).await;
                    return Err(err);
                }
            }
        }
        Ok(MultiGuard { guards })
    }

    fn check(&self) -> Result<()> {
        if self.names.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one name"));
        }
        if let Some(name) = &self.repeated {
            return Err(Error::invalid(format!(
                "a multi-lock names `{name}` twice; give each name once"
            )));
        }
        Ok(())
    }
}

async fn release_all(guards: Vec<Guard>) {
    for guard in guards {
        if let Err(err) = guard.release().await {
            tracing::debug!(error = %err, "releasing part of an incomplete multi-lock");
        }
    }
}

/// Every mutex of a [`MultiLock`], held together and released together.
///
/// # Examples
///
/// See [`MultiLock`].
#[must_use = "if unused the locks are released at once"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<Guard>,
}

impl MultiGuard {
    /// The guard of each name, in name order.
    ///
    /// # Examples
    ///
    /// See [`MultiLock`].
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    pub(crate) fn into_guards(self) -> Vec<Guard> {
        self.guards
    }

    /// The worst health among the names: `Lost` if any is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let all = client.multi_lock(["a", "b"]).lock().await?;
    /// assert_eq!(all.health(), distlock_core::Health::Held);
    /// # Ok(()) }
    /// ```
    pub fn health(&self) -> Health {
        let rank = |h: Health| match h {
            Health::Held => 0,
            Health::AtRisk => 1,
            Health::Lost => 2,
        };
        self.guards
            .iter()
            .map(Guard::health)
            .max_by_key(|h| rank(*h))
            .unwrap_or(Health::Lost)
    }

    /// The earliest safe deadline among the names.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let all = client.multi_lock(["a", "b"]).lock().await?;
    /// assert!(all.safe_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn safe_until(&self) -> Instant {
        self.guards
            .iter()
            .map(Guard::safe_until)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// Resolves when any of the names is lost (or released).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future has no effect on the locks.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let all = client.multi_lock(["a", "b"]).lock().await?;
    /// tokio::select! {
    ///     _ = all.lost() => eprintln!("lost one of them"),
    ///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = self
            .guards
            .iter()
            .map(|g| Box::pin(g.lost()) as Pin<Box<dyn Future<Output = ()> + Send>>)
            .collect();
        std::future::poll_fn(move |cx| {
            if each.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }

    /// Renews every name now; the first failure is returned after trying them all.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let all = client.multi_lock(["a", "b"]).lock().await?;
    /// all.renew().await?;
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self) -> Result<()> {
        let mut first = None;
        for guard in &self.guards {
            if let Err(err) = guard.renew().await {
                first.get_or_insert(err);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Releases every name now; the first failure (e.g. `NotHeld` for a lost one) is
    /// returned after releasing them all.
    ///
    /// # Examples
    ///
    /// See [`MultiLock`].
    pub async fn release(self) -> Result<()> {
        let mut first: Option<Error> = None;
        for guard in self.guards {
            if let Err(err) = guard.release().await {
                first.get_or_insert(err);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
