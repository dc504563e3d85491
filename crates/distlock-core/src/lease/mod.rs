//! The shared state of one grant: its fencing token, health, safe deadline and hold count;
//! its renewal (the client's watchdog decides when) and release.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::deadline::far_future;
use crate::backend::{Grant, LeaseOutcome, LockKind, Session, SessionState, safe_deadline};
use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::telemetry;
use crate::watchdog::Schedule;

mod release;

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
#[non_exhaustive]
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

    /// The state's name for logs and reports: `held`, `at-risk` or `lost`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::Health;
    /// assert_eq!(Health::AtRisk.as_str(), "at-risk");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Held => "held",
            Health::AtRisk => "at-risk",
            Health::Lost => "lost",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Status {
    pub(crate) health: Health,
    pub(crate) safe_until: Instant,
}

/// Renewal settings taken from the options at acquisition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenewPlan {
    pub(crate) auto: bool,
    pub(crate) every: Duration,
    pub(crate) max_hold: Option<Duration>,
    /// The bound of a release or a renewal asked for by hand.
    pub(crate) op_timeout: Duration,
}

pub(crate) struct LeaseCore {
    pub(crate) client: Arc<ClientInner>,
    grant: GrantInfo,
    status: watch::Sender<Status>,
    holds: AtomicUsize,
    /// Its place in the client's watchdog.
    schedule: StdMutex<Schedule>,
    /// When the core releases a grant that lives by session (it has no lease to lapse).
    pub(crate) release_at: Option<Instant>,
    /// Until when the grant's end is most likely an adoption, not a loss to warn of: the
    /// deadline of its last hand-off offer and a TTL more (a renewal learns it late).
    pub(crate) offered_until: StdMutex<Option<Instant>>,
}

impl std::fmt::Debug for LeaseCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.handle.name)
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
    /// The backend's handle of the grant.
    pub(crate) handle: Grant,
    pub(crate) kind: LockKind,
    pub(crate) permits: u32,
    pub(crate) owner: Owner,
    pub(crate) fencing_token: u64,
    pub(crate) ttl: Duration,
    /// When the request that was granted was sent: the lease runs from no earlier. For a
    /// grant handed over, no later than when the store made it.
    pub(crate) sent: Instant,
    /// For a grant handed over: its first lease, until the renewal that confirms it, due
    /// within its first quarter (see [`HandedOver`](crate::backend::HandedOver)).
    pub(crate) first_lease: Option<Duration>,
    pub(crate) reentrant: bool,
    pub(crate) plan: RenewPlan,
    /// For a grant that lives by session: the session it lives in.
    pub(crate) session: Option<SessionLink>,
}

/// The session a grant lives in, and the client's channel that reports on it.
#[derive(Debug, Clone)]
pub(crate) struct SessionLink {
    pub(crate) channel: watch::Receiver<Session>,
    pub(crate) id: u64,
}

impl SessionLink {
    /// How a grant in this session stands, judged by the session alone: `Lost` once it
    /// expired or was replaced; otherwise `Held` (connected) or `AtRisk` (suspended) until
    /// its validity.
    fn status(&self) -> Status {
        let session = *self.channel.borrow();
        let lost = |at| Status {
            health: Health::Lost,
            safe_until: at,
        };
        match session.state {
            _ if session.id != self.id => lost(Instant::now()),
            SessionState::Expired => lost(Instant::now()),
            SessionState::Connected { valid_until } => Status {
                health: Health::Held,
                safe_until: valid_until,
            },
            SessionState::Suspended { valid_until, .. } => Status {
                health: Health::AtRisk,
                safe_until: valid_until,
            },
        }
    }
}

impl LeaseCore {
    /// A freshly granted lease with one hold, its watchdog started.
    pub(crate) fn start(client: Arc<ClientInner>, grant: GrantInfo) -> Arc<LeaseCore> {
        // A grant that lives by session renews nothing, so it is released at its limit:
        // `max_hold`, or the TTL without automatic renewal. A lease just lapses then.
        let release_at = match (&grant.session, grant.plan.auto, grant.plan.max_hold) {
            (None, _, _) => None,
            (Some(_), false, max_hold) => {
                let limit = max_hold.map_or(grant.ttl, |m| m.min(grant.ttl));
                grant.sent.checked_add(limit)
            }
            (Some(_), true, max_hold) => max_hold.and_then(|m| grant.sent.checked_add(m)),
        };
        // A session grant's own deadline is its limit, if any: its validity is the session's.
        let safe_until = match (&grant.session, release_at) {
            (Some(_), Some(at)) => at,
            (Some(_), None) => far_future(),
            (None, _) => safe_deadline(grant.sent, grant.first_lease.unwrap_or(grant.ttl)),
        };
        let (status, _) = watch::channel(Status {
            health: Health::Held,
            safe_until,
        });
        let first_lease = grant.first_lease;
        let next_renew = match first_lease {
            // A renewal the lease cannot do without: confirmed whether renewals are
            // automatic or not, and on its own time, not aligned with the others.
            Some(lease) => grant.sent + lease / 4,
            None => client.renewals.align(
                grant
                    .sent
                    .checked_add(grant.plan.every)
                    .unwrap_or_else(far_future),
                grant.plan.every,
            ),
        };
        let core = Arc::new(LeaseCore {
            client,
            grant,
            status,
            holds: AtomicUsize::new(1),
            schedule: StdMutex::new(Schedule::new(next_renew, first_lease.is_some())),
            release_at,
            offered_until: StdMutex::new(None),
        });
        core.client.watchdog.start(&core);
        core
    }

    /// The grant's place in the client's watchdog.
    pub(crate) fn schedule(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn scheme(&self) -> &'static str {
        self.client.backend.scheme()
    }

    /// The grant's status: its own (`Lost` once marked so; for a lease, the safe deadline of
    /// the last renewal), and for a grant that lives by session, the session's as well.
    pub(crate) fn status(&self) -> Status {
        let own = *self.status.borrow();
        match &self.session {
            Some(link) if own.health != Health::Lost => {
                let session = link.status();
                Status {
                    health: match (own.health, session.health) {
                        (_, Health::Lost) => Health::Lost,
                        (Health::AtRisk, _) | (_, Health::AtRisk) => Health::AtRisk,
                        _ => Health::Held,
                    },
                    safe_until: own.safe_until.min(session.safe_until),
                }
            }
            _ => own,
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// A future that resolves once the grant is `Lost` (or released), owning what it needs.
    pub(crate) fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut status = self.subscribe();
        async move {
            let _ = status.wait_for(|s| s.health == Health::Lost).await;
        }
    }

    /// How the grant stands now: `Lost` once marked so, once its safe deadline passed, or
    /// once the backend learned that the store dropped it.
    pub(crate) fn health(&self) -> Health {
        let status = self.status();
        let lost = status.health != Health::Lost
            && (Instant::now() >= status.safe_until
                || self.client.backend.grant_lost(&self.handle));
        match lost {
            true => Health::Lost,
            false => status.health,
        }
    }

    /// Adds a hold for a reentrant acquisition: `None` if the grant is on its way out (its
    /// last hold was given up), a `LockLost` error if it is still held but no longer valid.
    pub(crate) fn try_add_hold(&self) -> Option<Result<()>> {
        if self.health() == Health::Lost {
            if self.holds.load(Ordering::Acquire) == 0 {
                return None;
            }
            return Some(Err(Error::new(
                ErrorKind::LockLost,
                "this owner's grant of the lock was lost; release it before acquiring again",
            )
            .with_backend(self.scheme())
            .with_operation("acquire")));
        }
        self.holds
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > 0).then_some(n + 1)
            })
            .ok()
            .map(|_| Ok(()))
    }

    /// Drops one hold: `Some(true)` when it was the last and the grant must now be
    /// released, `Some(false)` when others remain, `None` when none was left (`Client::close`
    /// gave them all up at once).
    fn drop_hold(&self) -> Option<bool> {
        self.holds
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()
            .map(|before| before == 1)
    }

    /// Marks the grant `Lost`: it is not safe from now on, whatever deadline it had.
    pub(crate) fn mark_lost(&self, why: &str) {
        let status = self.status();
        let was = self.status.send_replace(Status {
            health: Health::Lost,
            safe_until: status.safe_until.min(Instant::now()),
        });
        if was.health != Health::Lost {
            let offered = *self.offered_until.lock().unwrap_or_else(|e| e.into_inner());
            if offered.is_some_and(|until| Instant::now() <= until) {
                tracing::info!(lock = %self.handle.name, fencing_token = self.fencing_token, "an offered grant left this holder (adopted, most likely): {why}");
                return;
            }
            telemetry::lost(self.scheme());
            tracing::warn!(lock = %self.handle.name, fencing_token = self.fencing_token, "lease lost: {why}");
        }
    }

    /// Marks a released grant `Lost`, telling only the receivers there are (a `lost()`
    /// waiting): with none, the value changes without the notification, which costs a lock
    /// per notifier. A receiver that subscribes meanwhile counts before it reads the value
    /// under the channel's lock, so it is either told or reads the change.
    fn mark_released(&self) {
        self.status.send_if_modified(|s| {
            s.health = Health::Lost;
            self.status.receiver_count() > 0
        });
    }

    /// The error for an operation on a grant that is lost.
    fn lost_error(&self, operation: &'static str, why: &str) -> Error {
        Error::new(ErrorKind::LockLost, why.to_owned())
            .with_backend(self.scheme())
            .with_operation(operation)
    }

    /// One renewal round trip, given at most `patience` (the watchdog's; a renewal asked for
    /// by hand gets the operation timeout), and never past the safe deadline. One that
    /// outlasts its patience leaves the lease at risk; one that outlasts the safe deadline
    /// loses it. A grant that lives by session has nothing to renew: it answers how it
    /// stands.
    pub(crate) async fn renew_once(&self, patience: Option<Duration>) -> Result<()> {
        let scheme = self.scheme();
        if self.health() == Health::Lost {
            return Err(self.lost_error("renew", "the lease was already lost"));
        }
        if self.session.is_some() {
            return Ok(());
        }
        let status = self.status();
        let sent = Instant::now();
        let patience_left = patience.unwrap_or(self.plan.op_timeout);
        let give_up = sent
            .checked_add(patience_left)
            .map_or(status.safe_until, |p| p.min(status.safe_until));
        // The watchdog renews in batches; a renewal asked for by hand goes straight to the
        // backend.
        let renew = async {
            match patience {
                Some(_) => {
                    self.client
                        .renewals
                        .renew(self.handle.clone(), self.ttl)
                        .await
                }
                None => {
                    let outcomes = self
                        .client
                        .backend
                        .renew_many(std::slice::from_ref(&self.handle), self.ttl)
                        .await?;
                    Ok(outcomes.into_iter().next().unwrap_or(LeaseOutcome::NotHeld))
                }
            }
        };
        let renewal = tokio::time::timeout_at(give_up, renew)
            .instrument(
                tracing::debug_span!("distlock.renew", lock = %self.handle.name, backend = scheme),
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
                let why = "renewal did not finish before the lease's safe deadline";
                self.mark_lost(why);
                Err(self.lost_error("renew", why))
            }
            Ok(Ok(LeaseOutcome::Done)) => {
                telemetry::renewal(scheme, "ok");
                let renewed_until = safe_deadline(sent, self.ttl);
                // Once lost, always lost: a renewal answered after the guard was marked
                // lost, or after its safe deadline passed (when `health()` already said
                // `Lost`), does not bring it back.
                let now = Instant::now();
                let revived = self.status.send_if_modified(|s| {
                    if s.health == Health::Lost || now >= s.safe_until {
                        return false;
                    }
                    s.health = Health::Held;
                    s.safe_until = s.safe_until.max(renewed_until);
                    true
                });
                match revived {
                    true => {
                        self.schedule().unconfirmed = false;
                        Ok(())
                    }
                    false => {
                        let why = "the lease was lost while the renewal was in flight";
                        self.mark_lost(why);
                        Err(self.lost_error("renew", why))
                    }
                }
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
                tracing::warn!(lock = %self.handle.name, error = %err, "renewal failed; lease at risk");
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
        self.client.watchdog.stop(self);
        if self.reentrant {
            self.client.forget_reentrant(self);
        }
        telemetry::hold(self.scheme(), self.sent.elapsed());
    }
}
