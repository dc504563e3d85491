//! The one waiting loop every primitive and backend shares: enqueue, poll, wait for a change
//! with a bounded backstop, give up at the deadline, and leave nothing behind if dropped.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{Backend, LockKind, LockRequest, PollOutcome, Ticket};
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::lease::{GrantInfo, LeaseCore, RenewPlan};
use crate::name::validate_name;
use crate::options::LockOptions;
use crate::owner::{HolderMeta, random_id};
use crate::telemetry;

/// The longest a waiter sleeps between polls, even when the backend pushes wake-ups: it
/// keeps the waiter's queue entry fresh and bounds the cost of a missed notification.
const MAX_BACKSTOP: Duration = Duration::from_secs(2);
/// First and largest sleep of the polling fallback.
const FIRST_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

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
    let backend = client.backend().clone();
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

async fn acquire_inner(
    client: &Client,
    backend: &Arc<dyn Backend>,
    want: Want<'_>,
    options: &LockOptions,
    attempt: Attempt,
) -> Result<Option<Guard>> {
    validate_name(want.name)?;
    options.validate()?;
    check_permits(want.kind, want.permits)?;
    check_capabilities(backend.as_ref(), want.kind, options)?;

    if let Some(owner) = &options.reentrant {
        if let Some(lease) = client.inner().find_reentrant(want.name, want.kind, owner) {
            return Ok(Some(Guard::new(lease)));
        }
    }

    let waits = attempt == Attempt::Wait && options.wait != Some(Duration::ZERO);
    let deadline = options.wait.map(|w| Instant::now() + w);
    let request = LockRequest {
        name: want.name.to_owned(),
        kind: want.kind,
        permits: want.permits,
        owner: options
            .reentrant
            .clone()
            .unwrap_or_else(|| client.new_owner()),
        token: random_id() + &random_id(),
        ttl: options.ttl,
        fair: options.fair,
        wait: waits,
        meta: HolderMeta::this_process(),
    };
    let mut pending = PendingTicket {
        backend: backend.clone(),
        ticket: Some(backend.enqueue(request).await?),
    };
    let push = backend.capabilities().push_wakeups;
    let mut round: u32 = 0;
    loop {
        let sent = Instant::now();
        let ticket = pending.ticket();
        let polled = backend.poll(ticket).await;
        let retry_within = match polled {
            Ok(PollOutcome::Granted { fencing_token }) => {
                let ticket = pending.disarm();
                return Ok(Some(grant(client, ticket, fencing_token, sent, options)));
            }
            Ok(PollOutcome::Pending { .. }) if !waits => {
                pending.disarm();
                return if attempt == Attempt::Once {
                    Ok(None)
                } else {
                    Err(timeout_error(want.name, Duration::ZERO))
                };
            }
            Ok(PollOutcome::Pending { retry_within }) => retry_within,
            Err(err) if err.is_temporary() && waits => {
                tracing::debug!(error = %err, "poll failed; retrying");
                Some(MAX_BACKOFF)
            }
            Err(err) => return Err(err),
        };
        let now = Instant::now();
        let left = match deadline {
            Some(d) if now >= d => {
                pending.cancel_now().await;
                return Err(timeout_error(want.name, options.wait.unwrap_or_default()));
            }
            Some(d) => d - now,
            None => MAX_BACKSTOP,
        };
        let backstop = next_backstop(push, round, retry_within, left);
        round = round.saturating_add(1);
        if let Err(err) = backend.wait_for_change(pending.ticket(), backstop).await {
            if !err.is_temporary() {
                return Err(err);
            }
            tokio::time::sleep(backstop).await;
        }
    }
}

fn grant(
    client: &Client,
    ticket: Ticket,
    fencing_token: u64,
    sent: Instant,
    options: &LockOptions,
) -> Guard {
    let key = ticket.lease_key();
    let request = ticket.request;
    let lease = LeaseCore::start(
        client.inner().clone(),
        GrantInfo {
            key,
            kind: request.kind,
            permits: request.permits,
            owner: request.owner,
            fencing_token,
            ttl: request.ttl,
            sent,
            reentrant: options.reentrant.is_some(),
            plan: RenewPlan {
                auto: options.auto_renew,
                every: options.renew_interval(),
                max_hold: options.max_hold,
            },
        },
    );
    if options.reentrant.is_some() {
        client.inner().remember_reentrant(&lease);
    }
    tracing::debug!(fencing_token, "granted");
    Guard::new(lease)
}

/// How long to wait before polling again.
///
/// Push backends wait for their wake-up, bounded by the holders' remaining lease (plus a
/// millisecond, to poll after it ends) and [`MAX_BACKSTOP`]. Polling backends back off
/// exponentially with jitter from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`], also bounded by the
/// holders' remaining lease. Both are bounded by the time left until the deadline.
fn next_backstop(
    push: bool,
    round: u32,
    retry_within: Option<Duration>,
    left: Duration,
) -> Duration {
    let lease_bound = retry_within
        .map(|d| d + Duration::from_millis(1))
        .unwrap_or(MAX_BACKSTOP);
    let wait = if push {
        MAX_BACKSTOP
    } else {
        let grown = FIRST_BACKOFF.mul_f64(1.5f64.powi(round.min(20) as i32));
        grown
            .min(MAX_BACKOFF)
            .mul_f64(rand::rng().random_range(0.5..=1.0))
    };
    wait.min(lease_bound)
        .min(left)
        .min(MAX_BACKSTOP)
        .max(Duration::from_micros(200))
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

fn check_capabilities(backend: &dyn Backend, kind: LockKind, options: &LockOptions) -> Result<()> {
    let caps = backend.capabilities();
    let unsupported = |what: &str| {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("the {} backend does not support {what}", backend.scheme()),
        ))
    };
    match kind {
        LockKind::Read | LockKind::Write if !caps.rwlock => return unsupported("read/write locks"),
        LockKind::Semaphore { .. } if !caps.semaphore => return unsupported("semaphores"),
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
/// including when the acquire future is dropped mid-flight.
struct PendingTicket {
    backend: Arc<dyn Backend>,
    ticket: Option<Ticket>,
}

impl PendingTicket {
    fn ticket(&self) -> &Ticket {
        self.ticket
            .as_ref()
            .expect("ticket is present until disarmed")
    }

    fn disarm(&mut self) -> Ticket {
        self.ticket
            .take()
            .expect("ticket is present until disarmed")
    }

    async fn cancel_now(mut self) {
        if let Some(ticket) = self.ticket.take() {
            if let Err(err) = self.backend.cancel(&ticket).await {
                tracing::warn!(error = %err, "cancelling a ticket failed; its entry will expire");
            }
        }
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let backend = self.backend.clone();
        runtime.spawn(async move {
            if let Err(err) = backend.cancel(&ticket).await {
                tracing::warn!(error = %err, "cancelling an abandoned ticket failed; its entry will expire");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backstop_is_bounded_by_lease_and_deadline() {
        let b = next_backstop(
            true,
            0,
            Some(Duration::from_millis(5)),
            Duration::from_secs(10),
        );
        assert!(b <= Duration::from_millis(6));
        let b = next_backstop(false, 50, None, Duration::from_millis(3));
        assert!(b <= Duration::from_millis(3));
        let b = next_backstop(false, 50, None, Duration::from_secs(10));
        assert!(b <= MAX_BACKOFF);
    }
}
