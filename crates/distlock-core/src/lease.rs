//! The shared state of one grant: its fencing token, health, safe deadline and hold count,
//! and the watchdog that keeps it alive.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{LeaseKey, LeaseOutcome, LockKind};
use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::telemetry;

/// Part of the TTL assumed lost to clock-rate drift between client and server.
const CLOCK_DRIFT: f64 = 0.01;
/// Fixed safety margin subtracted from every lease.
const SAFETY_MARGIN: Duration = Duration::from_millis(2);

/// How a grant stands.
///
/// # Examples
///
/// ```
/// use distlock_core::Health;
/// assert!(Health::Held.is_valid());
/// assert!(Health::AtRisk.is_valid());
/// assert!(!Health::Lost.is_valid());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// The lease is valid and the last renewal (if any) succeeded.
    Held,
    /// A renewal failed; the lease may still be valid until `safe_until()`.
    AtRisk,
    /// The lease is gone: the backend denied ownership, or `safe_until()` passed without a
    /// successful renewal. A lost grant never becomes held again.
    Lost,
}

impl Health {
    /// Whether the holder may still act under the lock (`Held` or `AtRisk`, before
    /// `safe_until()`).
    ///
    /// # Examples
    ///
    /// See [`Health`].
    pub fn is_valid(self) -> bool {
        self != Health::Lost
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Status {
    pub(crate) health: Health,
    pub(crate) safe_until: Instant,
}

/// The latest moment a lease granted for `ttl` to a request sent at `sent` is safe to use.
pub(crate) fn safe_deadline(sent: Instant, ttl: Duration) -> Instant {
    let usable = ttl.mul_f64(1.0 - CLOCK_DRIFT).saturating_sub(SAFETY_MARGIN);
    sent + usable
}

/// Renewal settings taken from the options at acquisition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenewPlan {
    pub(crate) auto: bool,
    pub(crate) every: Duration,
    pub(crate) max_hold: Option<Duration>,
}

pub(crate) struct LeaseCore {
    pub(crate) client: Arc<ClientInner>,
    grant: GrantInfo,
    status: watch::Sender<Status>,
    holds: AtomicUsize,
    watchdog: StdMutex<Option<AbortHandle>>,
}

impl std::fmt::Debug for LeaseCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.key.name)
            .field("kind", &self.kind)
            .field("owner", &self.owner)
            .field("fencing_token", &self.fencing_token)
            .field("health", &self.status.borrow().health)
            .finish()
    }
}

impl std::ops::Deref for LeaseCore {
    type Target = GrantInfo;

    fn deref(&self) -> &GrantInfo {
        &self.grant
    }
}

/// What was granted, and how to keep it.
pub(crate) struct GrantInfo {
    pub(crate) key: LeaseKey,
    pub(crate) kind: LockKind,
    pub(crate) permits: u32,
    pub(crate) owner: Owner,
    pub(crate) fencing_token: u64,
    pub(crate) ttl: Duration,
    /// When the request that was granted was sent: the lease runs from no earlier.
    pub(crate) sent: Instant,
    pub(crate) reentrant: bool,
    pub(crate) plan: RenewPlan,
}

impl LeaseCore {
    /// A freshly granted lease with one hold, its watchdog started.
    pub(crate) fn start(client: Arc<ClientInner>, grant: GrantInfo) -> Arc<LeaseCore> {
        let (status, _) = watch::channel(Status {
            health: Health::Held,
            safe_until: safe_deadline(grant.sent, grant.ttl),
        });
        let core = Arc::new(LeaseCore {
            client,
            grant,
            status,
            holds: AtomicUsize::new(1),
            watchdog: StdMutex::new(None),
        });
        let span = tracing::debug_span!(
            "distlock.watchdog",
            lock = %core.key.name,
            backend = core.scheme()
        );
        let task = tokio::spawn(watchdog(Arc::downgrade(&core)).instrument(span));
        *core.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        core
    }

    pub(crate) fn scheme(&self) -> &'static str {
        self.client.backend.scheme()
    }

    pub(crate) fn status(&self) -> Status {
        *self.status.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// Adds a hold for a reentrant acquisition, unless the lease is already on its way out.
    pub(crate) fn try_add_hold(&self) -> bool {
        if self.status().health == Health::Lost {
            return false;
        }
        self.holds
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > 0).then_some(n + 1)
            })
            .is_ok()
    }

    /// Drops one hold; true when it was the last and the grant must now be released.
    fn drop_hold(&self) -> bool {
        self.holds.fetch_sub(1, Ordering::AcqRel) == 1
    }

    pub(crate) fn mark_lost(&self, why: &str) {
        let was = self.status.send_replace(Status {
            health: Health::Lost,
            ..self.status()
        });
        if was.health != Health::Lost {
            telemetry::lost(self.scheme());
            tracing::warn!(lock = %self.key.name, fencing_token = self.fencing_token, "lease lost: {why}");
        }
    }

    /// One renewal round trip, given at most `patience` (and never past the safe deadline).
    /// One that outlasts its patience leaves the lease at risk; one that outlasts the safe
    /// deadline loses it.
    pub(crate) async fn renew_once(&self, patience: Option<Duration>) -> Result<()> {
        let scheme = self.scheme();
        let status = self.status();
        if status.health == Health::Lost {
            return Err(Error::new(ErrorKind::NotHeld, "the lease was already lost")
                .with_backend(scheme)
                .with_operation("renew"));
        }
        let sent = Instant::now();
        let give_up = patience.map_or(status.safe_until, |p| (sent + p).min(status.safe_until));
        // The watchdog (which gives each attempt its patience) renews in batches; a renewal
        // asked for by hand goes straight to the backend.
        let renew = async {
            match patience {
                Some(_) => self.client.renewals.renew(self.key.clone(), self.ttl).await,
                None => self.client.backend.renew(&self.key, self.ttl).await,
            }
        };
        let renewal = tokio::time::timeout_at(give_up, renew)
            .instrument(
                tracing::debug_span!("distlock.renew", lock = %self.key.name, backend = scheme),
            )
            .await;
        match renewal {
            Err(_) if give_up < status.safe_until => {
                telemetry::renewal(scheme, "error");
                self.at_risk();
                Err(Error::new(
                    ErrorKind::Unavailable,
                    "renewal got no answer in time; the lease is at risk",
                )
                .with_backend(scheme)
                .with_operation("renew")
                .temporary())
            }
            Err(_) => {
                telemetry::renewal(scheme, "error");
                self.mark_lost("renewal did not finish before the lease's safe deadline");
                Err(Error::new(
                    ErrorKind::LockLost,
                    "renewal did not finish before the lease's safe deadline",
                )
                .with_backend(scheme)
                .with_operation("renew"))
            }
            Ok(Ok(LeaseOutcome::Done)) => {
                telemetry::renewal(scheme, "ok");
                let renewed_until = safe_deadline(sent, self.ttl);
                self.status.send_if_modified(|s| {
                    if s.health == Health::Lost {
                        return false;
                    }
                    s.health = Health::Held;
                    s.safe_until = s.safe_until.max(renewed_until);
                    true
                });
                Ok(())
            }
            Ok(Ok(LeaseOutcome::NotHeld)) => {
                telemetry::renewal(scheme, "not_held");
                self.mark_lost("the backend no longer has this grant");
                Err(Error::new(
                    ErrorKind::NotHeld,
                    "the grant is gone: it expired or another holder took it over",
                )
                .with_backend(scheme)
                .with_operation("renew"))
            }
            Ok(Err(err)) => {
                telemetry::renewal(scheme, "error");
                self.at_risk();
                tracing::warn!(lock = %self.key.name, error = %err, "renewal failed; lease at risk");
                Err(err)
            }
        }
    }

    fn at_risk(&self) {
        self.status.send_if_modified(|s| {
            let change = s.health == Health::Held;
            if change {
                s.health = Health::AtRisk;
            }
            change
        });
    }

    fn stop(&self) {
        if let Some(task) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
        if self.reentrant {
            self.client.forget_reentrant(self);
        }
        telemetry::hold(self.scheme(), self.sent.elapsed());
    }

    /// Gives up one hold now; releases the grant if it was the last one.
    pub(crate) async fn release_hold(&self) -> Result<()> {
        if !self.drop_hold() {
            return Ok(());
        }
        self.stop();
        let scheme = self.scheme();
        let outcome = self
            .client
            .backend
            .release(&self.key)
            .instrument(
                tracing::debug_span!("distlock.release", lock = %self.key.name, backend = scheme),
            )
            .await?;
        match outcome {
            LeaseOutcome::Done => {
                self.status.send_modify(|s| s.health = Health::Lost);
                Ok(())
            }
            LeaseOutcome::NotHeld => {
                self.mark_lost("released after the grant was already gone");
                Err(Error::new(
                    ErrorKind::NotHeld,
                    "the grant was already gone when released: it expired or was taken over",
                )
                .with_backend(scheme)
                .with_operation("release"))
            }
        }
    }

    /// Gives up one hold from `Drop`: the release, if due, runs in the background.
    pub(crate) fn release_hold_in_background(self: &Arc<Self>) {
        if !self.drop_hold() {
            return;
        }
        self.stop();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(lock = %self.key.name, "no runtime to release on; the lease will expire");
            return;
        };
        let core = Arc::clone(self);
        runtime.spawn(async move {
            match core.client.backend.release(&core.key).await {
                Ok(_) => core.status.send_modify(|s| s.health = Health::Lost),
                Err(err) => {
                    tracing::warn!(lock = %core.key.name, error = %err, "background release failed; the lease will expire")
                }
            }
        });
    }
}

/// Keeps a lease alive: renews every `plan.every`, marks it `AtRisk` on a failed renewal
/// (retrying sooner), and `Lost` when the backend denies it or the safe deadline passes.
async fn watchdog(lease: Weak<LeaseCore>) {
    let Some(core) = lease.upgrade() else { return };
    let plan = core.plan;
    let renew_until = plan.max_hold.map(|m| core.sent + m);
    let mut changes = core.subscribe();
    let mut next_renew = core
        .client
        .renewals
        .align(core.sent + plan.every, plan.every);
    drop(core);
    loop {
        let Some(core) = lease.upgrade() else { return };
        let status = core.status();
        if status.health == Health::Lost {
            return;
        }
        let renewing = plan.auto && renew_until.is_none_or(|until| next_renew < until);
        let wake = if renewing {
            next_renew.min(status.safe_until)
        } else {
            status.safe_until
        };
        drop(core);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            changed = changes.changed() => {
                if changed.is_err() { return }
                continue;
            }
        }
        let Some(core) = lease.upgrade() else { return };
        let now = Instant::now();
        if now >= core.status().safe_until {
            core.mark_lost("the safe deadline passed without a successful renewal");
            return;
        }
        if renewing && now >= next_renew {
            next_renew = match core.renew_once(Some(plan.every)).await {
                Ok(()) => core.client.renewals.align(now + plan.every, plan.every),
                Err(err)
                    if err.kind() == ErrorKind::NotHeld || err.kind() == ErrorKind::LockLost =>
                {
                    return;
                }
                Err(_) => now + (plan.every / 4).max(Duration::from_millis(5)),
            };
            changes.borrow_and_update();
        }
    }
}
