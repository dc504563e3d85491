//! The lock template: an async closure run under a grant, which is released once the
//! closure has finished, failed, panicked or been dropped, and never while it runs.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::closing::Running;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::lease::{Health, LeaseCore};
use crate::options::OnLost;
use crate::owner::Owner;

/// The grant a template's closure runs under: its fencing token (pass it to every write
/// the lock guards), owner, safe deadline and health.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let token = client
///     .mutex("reports/daily")
///     .with_lock(async |held: &distlock_core::Held| {
///         assert_eq!(held.name(), "reports/daily");
///         Ok::<_, distlock_core::Error>(held.fencing_token())
///     })
///     .await?;
/// assert!(token >= 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Held {
    lease: Arc<LeaseCore>,
}

impl Held {
    pub(crate) fn of(guard: &Guard) -> Held {
        Held {
            lease: guard.lease().clone(),
        }
    }

    /// Counts a body running under this grant in with its client, until the mark drops.
    fn enter_body(&self) -> Running {
        self.lease.client.closing.enter()
    }

    /// The lock's name.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn name(&self) -> &str {
        &self.lease.handle.name
    }

    /// The grant's fencing token.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn fencing_token(&self) -> u64 {
        self.lease.fencing_token
    }

    /// The owner the grant is recorded under.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn owner(&self) -> &Owner {
        &self.lease.owner
    }

    /// Until when, on this process's monotonic clock, the lease is surely valid.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn safe_until(&self) -> Instant {
        self.lease.status().safe_until.into_std()
    }

    /// How the lease stands now.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn health(&self) -> Health {
        self.lease.health()
    }

    /// A future that resolves when the lease is lost (or released).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future has no effect on the lease.
    ///
    /// # Examples
    ///
    /// See [`Held`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.lease.lost()
    }
}

tokio::task_local! {
    /// The grants the current task's template closures run under, innermost last.
    static UNDER: Arc<[Held]>;
}

/// The fencing token of the innermost template closure the current task runs in (`None`
/// outside one), for code deep below it that fences its writes. A task spawned from the
/// closure is outside it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// assert_eq!(distlock_core::current_token(), None);
/// client
///     .with_lock("jobs/nightly", async |held: &distlock_core::Held| {
///         assert_eq!(distlock_core::current_token(), Some(held.fencing_token()));
///         Ok::<_, distlock_core::Error>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
pub fn current_token() -> Option<u64> {
    UNDER
        .try_with(|under| under.last().map(Held::fencing_token))
        .ok()
        .flatten()
}

/// Checks that the current task runs in a template closure under lock `name`, still
/// valid: its fencing token, else `NotHeld` (not under it) or `LockLost` (under it, but
/// the lease is gone).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// use distlock_core::{ErrorKind, assert_held};
/// assert_eq!(assert_held("ledger").unwrap_err().kind(), ErrorKind::NotHeld);
/// client
///     .with_lock("ledger", async |_held: &distlock_core::Held| {
///         assert!(assert_held("ledger").is_ok());
///         assert!(assert_held("other").is_err());
///         Ok::<_, distlock_core::Error>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
pub fn assert_held(name: &str) -> Result<u64> {
    let found = UNDER
        .try_with(|under| under.iter().rev().find(|h| h.name() == name).cloned())
        .ok()
        .flatten();
    match found {
        None => Err(Error::new(
            ErrorKind::NotHeld,
            format!("this code does not run under lock `{name}`"),
        )),
        Some(held) if held.health() == Health::Lost => Err(Error::new(
            ErrorKind::LockLost,
            format!("lock `{name}` was lost"),
        )),
        Some(held) => Ok(held.fencing_token()),
    }
}

/// A future's output, or the panic it raised while polled.
struct Unwinding<'a, F>(Pin<&'a mut F>);

impl<F: Future> Future for Unwinding<'_, F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

/// Runs `f` under `guard`'s grant and releases it after: `f`'s result (its panic resumed
/// once the grant is released), or `LockLost` if `on_lost` cancelled it.
pub(crate) async fn run_under<T, E, F>(
    guard: Guard,
    on_lost: OnLost,
    f: F,
) -> std::result::Result<T, E>
where
    F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
    E: From<Error>,
{
    let held = Held::of(&guard);
    let body = f(&held);
    finish(vec![guard], std::slice::from_ref(&held), on_lost, body).await
}

/// Runs `f` under `guard` when the try that gave it was granted, as [`run_under`]; `Ok(None)`
/// without running `f` when it found the lock busy (`None`).
pub(crate) async fn run_if_granted<T, E, F>(
    guard: Option<Guard>,
    on_lost: OnLost,
    f: F,
) -> std::result::Result<Option<T>, E>
where
    F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
    E: From<Error>,
{
    match guard {
        Some(guard) => run_under(guard, on_lost, f).await.map(Some),
        None => Ok(None),
    }
}

/// Runs `f` under every grant of `guards` (one per name, in name order) and releases them
/// after, as [`run_under`]; the loss of any one is the loss.
pub(crate) async fn run_under_all<T, E, F>(
    guards: Vec<Guard>,
    on_lost: OnLost,
    f: F,
) -> std::result::Result<T, E>
where
    F: AsyncFnOnce(&[Held]) -> std::result::Result<T, E>,
    E: From<Error>,
{
    let held: Vec<Held> = guards.iter().map(Held::of).collect();
    let body = f(&held);
    finish(guards, &held, on_lost, body).await
}

/// Resolves when any of `held` is lost.
fn any_lost(held: &[Held]) -> impl Future<Output = ()> + Send + 'static {
    let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = held
        .iter()
        .map(|h| Box::pin(h.lost()) as Pin<Box<dyn Future<Output = ()> + Send>>)
        .collect();
    std::future::poll_fn(
        move |cx| match each.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        },
    )
}

/// Runs `body`, the closure's future over `held` (the grants of `guards`), as the
/// task's current grants; then releases `guards`.
async fn finish<T, E>(
    guards: Vec<Guard>,
    held: &[Held],
    on_lost: OnLost,
    body: impl Future<Output = std::result::Result<T, E>>,
) -> std::result::Result<T, E>
where
    E: From<Error>,
{
    let finished = run_body(held, on_lost, body).await;
    for guard in guards {
        release_after(guard).await;
    }
    conclude(finished, held)
}

/// How a closure ended.
pub(crate) enum Ended<R> {
    /// Of itself: its output, or its panic.
    Done(std::thread::Result<R>),
    /// Cancelled by the loss of one of its grants.
    Lost,
    /// Cancelled by the close of a client whose grant it ran under.
    Closed,
}

/// Runs `body` under `held`: to its end; cancelled at a loss with [`OnLost::Cancel`]; and
/// cancelled, whatever `on_lost`, when a client of `held` is closed (which releases the
/// grants only once the body ended).
pub(crate) async fn run_body<R>(
    held: &[Held],
    on_lost: OnLost,
    body: impl Future<Output = R>,
) -> Ended<R> {
    let under = match UNDER.try_with(Arc::clone) {
        Ok(outer) => outer.iter().chain(held).cloned().collect(),
        Err(_) => Arc::from(held),
    };
    let mut body = Box::pin(UNDER.scope(under, body));
    let mut running: Vec<Running> = held.iter().map(Held::enter_body).collect();
    let closed = any_closed(&mut running);
    let lost = async {
        match on_lost {
            OnLost::Cancel => any_lost(held).await,
            OnLost::Signal => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        out = Unwinding(body.as_mut()) => Ended::Done(out),
        () = lost => Ended::Lost,
        () = closed => Ended::Closed,
    }
}

/// Resolves once a close of any client of `running` began since its body started.
async fn any_closed(running: &mut [Running]) {
    let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = running
        .iter_mut()
        .map(|r| Box::pin(r.closed()) as Pin<Box<dyn Future<Output = ()> + Send + '_>>)
        .collect();
    std::future::poll_fn(
        move |cx| match each.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        },
    )
    .await
}

/// Releases `guard` once its closure has ended; a failure is logged, as the lease ends on
/// its own.
pub(crate) async fn release_after(guard: Guard) {
    let name = guard.name().to_owned();
    if let Err(err) = guard.release().await
        && err.kind() != ErrorKind::NotHeld
    {
        tracing::warn!(lock = %name, error = %err, "releasing after the template's closure failed; the lease ends on its own");
    }
}

/// The closure's result once its grants are settled: its output, its panic resumed, or
/// `LockLost` when a loss of one of `held` cancelled it.
pub(crate) fn conclude<T, E>(
    finished: Ended<std::result::Result<T, E>>,
    held: &[Held],
) -> std::result::Result<T, E>
where
    E: From<Error>,
{
    let names: Vec<&str> = held.iter().map(Held::name).collect();
    let which = match names.as_slice() {
        [one] => format!("lock `{one}`"),
        many => format!("one of the locks `{}`", many.join("`, `")),
    };
    let why = match finished {
        Ended::Done(Ok(out)) => return out,
        Ended::Done(Err(panic)) => std::panic::resume_unwind(panic),
        Ended::Lost => format!("{which} was lost while the closure ran under it"),
        Ended::Closed => format!("the client of {which} was closed while the closure ran under it"),
    };
    Err(E::from(Error::new(
        ErrorKind::LockLost,
        format!("{why}; the closure was stopped"),
    )))
}
