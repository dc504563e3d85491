//! The one waiting loop every primitive and backend shares: build the ticket, enqueue it,
//! poll, wait for a change, give up at the deadline, and leave nothing behind however the
//! acquisition ends — granted, refused, timed out, failed, or dropped at any await.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{
    Backend, Capabilities, Liveness, LockKind, LockRequest, PollOutcome, Session, Ticket,
};
use crate::cleanups::Cleanups;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::lease::{GrantInfo, LeaseCore, RenewPlan, SessionLink};
use crate::name::check_name_for;
use crate::options::LockOptions;
use crate::owner::{HolderMeta, random_token};
use crate::telemetry;

/// First and largest sleep of the polling fallback.
const FIRST_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(250);
/// How long an acquire that ends without a grant waits for its cancellation before leaving
/// it to the background (a hung server must not hold the caller past its deadline).
const CANCEL_GRACE: Duration = Duration::from_millis(50);
/// The longest a background cancellation of an abandoned ticket may take.
const BACKGROUND_CANCEL: Duration = Duration::from_secs(30);

/// One attempt or a wait until granted or timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    Once,
    Wait,
}

/// What to acquire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Want<'a> {
    pub(crate) name: &'a str,
    pub(crate) kind: LockKind,
    pub(crate) permits: u32,
}

/// Acquires `want`; `Ok(None)` means not granted (only for `Attempt::Once`, or a zero wait).
pub(crate) async fn acquire(
    client: &Client,
    want: Want<'_>,
    options: &LockOptions,
    attempt: Attempt,
) -> Result<Option<Guard>> {
    let backend = crate::client::backend_of(client).clone();
    let scheme = backend.scheme();
    let span = tracing::debug_span!("distlock.acquire", lock = %want.name, backend = scheme, kind = want.kind.as_str());
    let started = Instant::now();
    let outcome = acquire_inner(client, &backend, want, options, attempt)
        .instrument(span)
        .await;
    let label = match &outcome {
        Ok(Some(_)) => "granted",
        Ok(None) => "busy",
        Err(e) if e.kind() == ErrorKind::Timeout => "timeout",
        Err(_) => "error",
    };
    telemetry::acquire(scheme, label, started.elapsed());
    outcome.map_err(|e| match e.operation() {
        Some(_) => e,
        None => e.with_backend(scheme).with_operation("acquire"),
    })
}

/// How one acquisition waits: until when each backend call may run, and how the backend
/// wants to be polled.
struct Plan {
    waits: bool,
    /// The wait deadline (`None`: no limit, or a single attempt).
    deadline: Option<Instant>,
    /// Until when the backend calls may run: the deadline, or the operation timeout for a
    /// single attempt.
    calls_until: Option<Instant>,
    caps: Capabilities,
    session: Option<watch::Receiver<Session>>,
}

async fn acquire_inner(
    client: &Client,
    backend: &Arc<dyn Backend>,
    want: Want<'_>,
    options: &LockOptions,
    attempt: Attempt,
) -> Result<Option<Guard>> {
    check_name_for(backend.as_ref(), want.name)?;
    options.validate()?;
    check_permits(want.kind, want.permits)?;
    let caps = backend.capabilities();
    check_capabilities(backend.as_ref(), caps, want.kind, options)?;

    if let Some(owner) = &options.reentrant
        && let Some(held) = client.inner().find_reentrant(want.name, want.kind, owner)
    {
        return held.map(|lease| Some(Guard::new(lease)));
    }

    let waits = attempt == Attempt::Wait && options.wait != Some(Duration::ZERO);
    let now = Instant::now();
    let deadline = match waits {
        true => options.wait.and_then(|w| now.checked_add(w)),
        false => None,
    };
    let session = match caps.liveness {
        Liveness::Lease => None,
        Liveness::Session => Some(backend.session().ok_or_else(|| {
            Error::new(
                ErrorKind::Backend,
                "a session backend reported no session channel",
            )
        })?),
    };
    let plan = Plan {
        waits,
        deadline,
        calls_until: match waits {
            true => deadline,
            false => now.checked_add(options.op_timeout_value()),
        },
        caps,
        session,
    };
    let owner = options
        .reentrant
        .clone()
        .unwrap_or_else(|| client.new_owner());
    loop {
        let request = LockRequest {
            name: want.name.to_owned(),
            kind: want.kind,
            permits: want.permits,
            owner: owner.clone(),
            token: random_token(),
            ttl: options.ttl,
            fair: options.fair,
            wait: waits,
            meta: HolderMeta::this_process(),
        };
        match wait_for_grant(backend, &client.inner().cleanups, request, &plan, options).await? {
            Granted::Yes(granted) => {
                return Ok(Some(grant(client, granted, plan.session.clone(), options)));
            }
            Granted::No => {
                return match attempt {
                    Attempt::Once => Ok(None),
                    Attempt::Wait => Err(timeout_error(want.name, Duration::ZERO)),
                };
            }
            // Granted in a session that ended meanwhile: nothing was held; ask again, in
            // the session that serves now.
            Granted::InDeadSession => continue,
        }
    }
}

#[allow(
    clippy::large_enum_variant,
    reason = "made once per acquire and moved once: cheaper than boxing the grant"
)]
enum Granted {
    Yes(GrantedTicket),
    No,
    InDeadSession,
}

/// A ticket the backend granted: its fencing token, when the poll that granted it was sent
/// (for a grant handed over, when the store made it, at the latest), and the session it
/// lives in (for session backends).
pub(crate) struct GrantedTicket {
    pub(crate) ticket: Ticket,
    pub(crate) fencing_token: u64,
    pub(crate) sent: Instant,
    pub(crate) session: Option<u64>,
    /// For a grant handed over: its first lease, shorter than the TTL (see
    /// [`HandedOver`](crate::backend::HandedOver)).
    pub(crate) first_lease: Option<Duration>,
}

/// Enqueues `request` and polls it until it is granted, refused (a single attempt), or the
/// deadline passes. The ticket is cancelled on every way out but a grant.
async fn wait_for_grant(
    backend: &Arc<dyn Backend>,
    cleanups: &Arc<Cleanups>,
    request: LockRequest,
    plan: &Plan,
    options: &LockOptions,
) -> Result<Granted> {
    let name = request.name.clone();
    let timed_out = || {
        let waited = options.wait.unwrap_or_default();
        match plan.waits {
            true => timeout_error(&name, waited),
            false => Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the backend did not answer within the operation timeout {:?}",
                    options.op_timeout_value()
                ),
            )
            .temporary(),
        }
    };
    let mut pending = PendingTicket::new(backend.clone(), Ticket::new(request), cleanups.clone());
    match bounded(plan.calls_until, backend.enqueue(pending.ticket_mut())).await {
        Some(Ok(())) => {}
        Some(Err(err)) => return Err(pending.failed(err)),
        None => return Err(timed_out()),
    }
    let mut round: u32 = 0;
    loop {
        let sent = Instant::now();
        let polled = match bounded(plan.calls_until, backend.poll(pending.ticket_mut())).await {
            Some(polled) => polled,
            None => {
                pending.cancel_within(CANCEL_GRACE).await;
                return Err(timed_out());
            }
        };
        let retry_within = match polled {
            Ok(PollOutcome::Granted {
                fencing_token,
                session,
                handed_over,
            }) => {
                if !plan.in_live_session(session) {
                    tracing::debug!("granted in a session that ended; asking again");
                    pending.cancel_within(CANCEL_GRACE).await;
                    return Ok(Granted::InDeadSession);
                }
                return Ok(Granted::Yes(GrantedTicket {
                    ticket: pending.disarm(),
                    fencing_token,
                    sent: handed_over.map_or(sent, |lease| lease.from),
                    session,
                    first_lease: handed_over.map(|lease| lease.lasts),
                }));
            }
            Ok(PollOutcome::Pending { .. }) if !plan.waits => {
                pending.disarm();
                return Ok(Granted::No);
            }
            Ok(PollOutcome::Pending { retry_within }) => retry_within,
            Err(err) if err.is_temporary() && plan.waits => {
                // The store is out of reach (a lost connection, a session being replaced):
                // nothing will wake this request, so it waits here before asking again.
                telemetry::retry(backend.scheme(), &err);
                let left = plan
                    .deadline
                    .map_or(MAX_BACKOFF, |d| d.saturating_duration_since(Instant::now()));
                if left.is_zero() {
                    pending.cancel_within(CANCEL_GRACE).await;
                    return Err(timed_out());
                }
                tokio::time::sleep(backoff(round).min(left)).await;
                round = round.saturating_add(1);
                continue;
            }
            Err(err) => {
                let err = pending.failed(err);
                pending.cancel_within(CANCEL_GRACE).await;
                return Err(err);
            }
        };
        let left = plan
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            pending.cancel_within(CANCEL_GRACE).await;
            return Err(timed_out());
        }
        let backstop = next_backstop(plan.caps, round, retry_within, left);
        round = round.saturating_add(1);
        let waited = bounded(
            plan.calls_until,
            backend.wait_for_change(pending.ticket_mut(), backstop),
        )
        .await;
        if let Some(Err(err)) = waited {
            if !err.is_temporary() {
                let err = pending.failed(err);
                pending.cancel_within(CANCEL_GRACE).await;
                return Err(err);
            }
            telemetry::retry(backend.scheme(), &err);
            // The backstop is already bounded by the deadline, which the next poll checks.
            tokio::time::sleep(backstop.unwrap_or(MAX_BACKOFF).min(MAX_BACKOFF)).await;
        }
    }
}

impl Plan {
    /// Whether a grant made in `session` may be handed out: always for leases; for session
    /// backends, only while that session is the live one.
    fn in_live_session(&self, session: Option<u64>) -> bool {
        let Some(current) = &self.session else {
            return true;
        };
        let current = *current.borrow();
        session == Some(current.id) && current.is_alive()
    }
}

/// Runs `call` until `until` (`None`: without limit); `None` if the time ran out first.
async fn bounded<T>(until: Option<Instant>, call: impl Future<Output = T>) -> Option<T> {
    match until {
        Some(until) => tokio::time::timeout_at(until, call).await.ok(),
        None => Some(call.await),
    }
}

pub(crate) fn grant(
    client: &Client,
    granted: GrantedTicket,
    channel: Option<watch::Receiver<Session>>,
    options: &LockOptions,
) -> Guard {
    let GrantedTicket {
        ticket,
        fencing_token,
        sent,
        session,
        first_lease,
    } = granted;
    let (kind, permits, owner, ttl) = (
        ticket.request.kind,
        ticket.request.permits,
        ticket.request.owner.clone(),
        ticket.request.ttl,
    );
    let lease = LeaseCore::start(
        client.inner().clone(),
        GrantInfo {
            handle: ticket.into_grant(),
            kind,
            permits,
            owner,
            fencing_token,
            ttl,
            sent,
            first_lease,
            reentrant: options.reentrant.is_some(),
            plan: RenewPlan {
                auto: options.auto_renew,
                every: options.renew_interval(),
                max_hold: options.max_hold,
                op_timeout: options.op_timeout_value(),
            },
            session: channel
                .zip(session)
                .map(|(channel, id)| SessionLink { channel, id }),
        },
    );
    if options.reentrant.is_some() {
        client.inner().remember_reentrant(&lease);
    }
    tracing::debug!(fencing_token, "granted");
    Guard::new(lease)
}

/// The pause before the `round`th retry: growing by half from [`FIRST_BACKOFF`] up to
/// [`MAX_BACKOFF`], jittered down by up to half so waiters do not retry in step.
fn backoff(round: u32) -> Duration {
    FIRST_BACKOFF
        .mul_f64(1.5f64.powi(round.min(20) as i32))
        .min(MAX_BACKOFF)
        .mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// How long to wait before polling again (`None`: until woken).
///
/// Push backends wait for their wake-up, bounded by the holders' remaining lease (plus a
/// millisecond, to poll after it ends) and the backend's waiter refresh period, if any.
/// Polling backends back off exponentially with jitter from [`FIRST_BACKOFF`] to
/// [`MAX_BACKOFF`], under the same bounds. All are bounded by the time left until the
/// deadline.
fn next_backstop(
    caps: Capabilities,
    round: u32,
    retry_within: Option<Duration>,
    left: Option<Duration>,
) -> Option<Duration> {
    let backoff = (!caps.push_wakeups).then(|| backoff(round));
    [
        retry_within.map(|d| d.saturating_add(Duration::from_millis(1))),
        caps.waiter_refresh,
        backoff,
        left,
    ]
    .into_iter()
    .flatten()
    .min()
    .map(|wait| wait.max(Duration::from_micros(200)))
}

fn timeout_error(name: &str, waited: Duration) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!("lock `{name}` was not granted within {waited:?}"),
    )
}

fn check_permits(kind: LockKind, permits: u32) -> Result<()> {
    match kind {
        LockKind::Semaphore { limit: 0 } => {
            Err(Error::invalid("a semaphore needs at least one permit"))
        }
        LockKind::Semaphore { .. } if permits == 0 => {
            Err(Error::invalid("acquire at least one permit"))
        }
        LockKind::Semaphore { limit } if permits > limit => Err(Error::invalid(format!(
            "asked for {permits} permits of a semaphore that has {limit}"
        ))),
        _ => Ok(()),
    }
}

fn check_capabilities(
    backend: &dyn Backend,
    caps: Capabilities,
    kind: LockKind,
    options: &LockOptions,
) -> Result<()> {
    let scheme = backend.scheme();
    let unsupported = |what: &str| {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("the {scheme} backend does not support {what}"),
        ))
    };
    let kind_unsupported = |what: &str| match backend.why_unsupported(kind) {
        Some(why) => Err(Error::new(
            ErrorKind::Unsupported,
            format!("the {scheme} backend does not support {what}: {why}"),
        )),
        None => unsupported(what),
    };
    match kind {
        LockKind::Read | LockKind::Write if !caps.rwlock => {
            return kind_unsupported("read/write locks");
        }
        LockKind::Semaphore { .. } if !caps.semaphore => return kind_unsupported("semaphores"),
        LockKind::Semaphore { .. } if options.reentrant.is_some() => {
            return Err(Error::invalid(
                "reentrancy applies to locks, not to semaphore permits",
            ));
        }
        _ => {}
    }
    if options.fair && !caps.fair {
        return unsupported("fair (FIFO) ordering");
    }
    Ok(())
}

/// A ticket that is cancelled if the acquisition ends without a grant being handed out,
/// including when the acquire future is dropped at any await — during enqueue, poll, wait,
/// or its own cancellation.
struct PendingTicket {
    backend: Arc<dyn Backend>,
    ticket: Option<Ticket>,
    cleanups: Arc<Cleanups>,
    /// The kind of error the request itself failed with, if it failed: a cancel that fails
    /// the same way says nothing new, and is logged at debug, not above the error.
    failed: Option<ErrorKind>,
}

impl PendingTicket {
    fn new(backend: Arc<dyn Backend>, ticket: Ticket, cleanups: Arc<Cleanups>) -> Self {
        PendingTicket {
            backend,
            cleanups,
            ticket: Some(ticket),
            failed: None,
        }
    }

    /// Notes that the request failed with `err`, and hands the error back.
    fn failed(&mut self, err: Error) -> Error {
        self.failed = Some(err.kind());
        err
    }

    fn ticket_mut(&mut self) -> &mut Ticket {
        self.ticket
            .as_mut()
            .expect("ticket is present until disarmed")
    }

    fn disarm(&mut self) -> Ticket {
        self.ticket
            .take()
            .expect("ticket is present until disarmed")
    }

    /// Cancels the ticket now, waiting at most `grace`; a cancellation that takes longer
    /// goes on in the background. The ticket stays armed until its cancellation finished,
    /// so one dropped halfway is started again.
    async fn cancel_within(mut self, grace: Duration) {
        let Some(ticket) = self.ticket.as_mut() else {
            return;
        };
        match tokio::time::timeout(grace, self.backend.cancel(ticket)).await {
            Ok(Ok(())) => {
                self.ticket = None;
            }
            Ok(Err(err)) => {
                self.ticket = None;
                cancel_failed(
                    self.failed,
                    &err,
                    "cancelling a ticket failed; its entry will expire",
                );
            }
            Err(_) => {}
        }
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        let Some(mut ticket) = self.ticket.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let backend = self.backend.clone();
        let cleanup = self.cleanups.start();
        let failed = self.failed;
        runtime.spawn(async move {
            let _cleanup = cleanup;
            match tokio::time::timeout(BACKGROUND_CANCEL, backend.cancel(&mut ticket)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => cancel_failed(
                    failed,
                    &err,
                    "cancelling an abandoned ticket failed; its entry will expire",
                ),
                Err(_) => tracing::warn!(
                    "cancelling an abandoned ticket got no answer in {BACKGROUND_CANCEL:?}; its entry will expire"
                ),
            }
        });
    }
}

/// Logs a cancel that failed with `err`: at debug when the request had failed with the same
/// kind of error (a refused password, a read-only file: the caller gets that error, and a
/// warning before it would only mislead), as a warning otherwise.
fn cancel_failed(request_failed: Option<ErrorKind>, err: &Error, what: &str) {
    match request_failed == Some(err.kind()) {
        true => tracing::debug!(error = %err, "{what}"),
        false => tracing::warn!(error = %err, "{what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backstop_is_bounded_by_lease_refresh_and_deadline() {
        let push = Capabilities::full(true);
        let polling = Capabilities::full(false);
        let b = next_backstop(
            push,
            0,
            Some(Duration::from_millis(5)),
            Some(Duration::from_secs(10)),
        );
        assert!(b.unwrap() <= Duration::from_millis(6));
        let b = next_backstop(polling, 50, None, Some(Duration::from_millis(3)));
        assert!(b.unwrap() <= Duration::from_millis(3));
        let b = next_backstop(polling, 50, None, None);
        assert!(b.unwrap() <= MAX_BACKOFF);
        assert_eq!(next_backstop(push, 0, None, None), push.waiter_refresh);
    }

    #[test]
    fn push_waiters_that_do_not_expire_wait_only_for_a_wake_up() {
        let caps = Capabilities {
            waiter_refresh: None,
            ..Capabilities::full(true)
        };
        assert_eq!(next_backstop(caps, 0, None, None), None);
        assert_eq!(
            next_backstop(caps, 0, None, Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
    }
}
