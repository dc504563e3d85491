//! How a grant ends: released now, in the background, or left to the store for a while.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use tracing::Instrument;

use super::LeaseCore;
use crate::backend::LeaseOutcome;
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Health;
use crate::options::MIN_TTL;
use crate::telemetry;

/// The first pause before a failed last renewal is tried again; it doubles up to
/// [`RETRY_MOST`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between tries of a last renewal.
const RETRY_MOST: Duration = Duration::from_secs(1);

impl LeaseCore {
    /// How many holds the grant has (more than one only for a reentrant grant).
    pub(crate) fn holds(&self) -> usize {
        self.holds.load(Ordering::Acquire)
    }

    /// Gives up one hold now; releases the grant if it was the last one, waiting at most
    /// the operation timeout for the backend.
    pub(crate) async fn release_hold(&self) -> Result<()> {
        match self.drop_hold() {
            Some(true) => self.release_grant().await,
            Some(false) => Ok(()),
            None => Err(Error::new(
                ErrorKind::NotHeld,
                "the grant was already released by Client::close",
            )
            .with_backend(self.scheme())
            .with_operation("release")),
        }
    }

    /// Gives up every hold at once and releases the grant (`Client::close`); the guards
    /// still around find it released.
    pub(crate) async fn release_all_holds(&self) -> Result<()> {
        if self.holds.swap(0, Ordering::AcqRel) == 0 {
            return Ok(());
        }
        self.release_grant().await
    }

    /// Releases the grant, waiting at most the operation timeout for the backend. A grant
    /// already `Lost` (its guard's `lost()` fired) is still deleted, as the store may keep it
    /// a while yet, but its release is `NotHeld` even when the store found it: the guard's
    /// verdict stands, so code that checks the release learns what `lost()` told.
    async fn release_grant(&self) -> Result<()> {
        let lost_before = self.health() == Health::Lost;
        self.stop();
        let scheme = self.scheme();
        let release = self.client.backend.release(&self.handle).instrument(
            tracing::debug_span!("distlock.release", lock = %self.handle.name, backend = scheme),
        );
        let outcome = match tokio::time::timeout(self.plan.op_timeout, release).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(err)) => {
                // Nothing renews it any more: it is not safe to go on with it.
                self.mark_lost("the release failed; the grant ends with its lease or session");
                return Err(err);
            }
            Err(_) => {
                self.mark_lost("released without an answer from the backend");
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "the backend did not answer the release within {:?}; the grant ends with its lease or session",
                        self.plan.op_timeout
                    ),
                )
                .with_backend(scheme)
                .with_operation("release")
                .temporary());
            }
        };
        match outcome {
            LeaseOutcome::Done if lost_before => {
                self.mark_released();
                Err(Error::new(
                    ErrorKind::NotHeld,
                    "the grant had been lost before the release (its lost() had fired); the store's copy is deleted now",
                )
                .with_backend(scheme)
                .with_operation("release"))
            }
            LeaseOutcome::Done => {
                self.mark_released();
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

    /// Hands the grant to the store until `until` and forgets it here: the watchdog stops,
    /// one last renewal makes the store keep the grant until then (measured by the store,
    /// from when the renewal is sent), and nothing releases it after: the store frees it
    /// when that lease ends, whether this process lives or not. For a grant with a lease of
    /// its own and one hold. A renewal that fails or gets no answer is tried again until
    /// the lease it has runs out; then the grant is lost, ending with that lease.
    pub(crate) async fn leave_in_store(&self, until: Instant) -> Result<()> {
        let scheme = self.scheme();
        if self.health() == Health::Lost {
            return Err(self.lost_error("release", "the lease was already lost"));
        }
        // No watchdog renewal may come after the last one and shorten it again.
        self.stop();
        self.holds.store(0, Ordering::Release);
        let safe_until = self.status().safe_until;
        let mut pause = RETRY_FIRST;
        let failed = loop {
            let sent = Instant::now();
            let ttl = until.saturating_duration_since(sent).max(MIN_TTL);
            let give_up = (sent + self.plan.op_timeout).min(safe_until);
            let renew = self
                .client
                .backend
                .renew_many(std::slice::from_ref(&self.handle), ttl);
            let failed = match tokio::time::timeout_at(give_up, renew).await {
                Ok(Ok(outcomes)) if outcomes.first() == Some(&LeaseOutcome::Done) => {
                    telemetry::renewal(scheme, "ok");
                    self.mark_released();
                    return Ok(());
                }
                Ok(Ok(_)) => {
                    telemetry::renewal(scheme, "not_held");
                    self.mark_lost("the backend no longer had the grant at its last renewal");
                    return Err(Error::new(
                        ErrorKind::NotHeld,
                        "the grant was gone before its last renewal: it expired or was taken over",
                    )
                    .with_backend(scheme)
                    .with_operation("release"));
                }
                Ok(Err(err)) => err,
                Err(_) => Error::new(ErrorKind::Unavailable, "the last renewal got no answer")
                    .with_backend(scheme)
                    .with_operation("release")
                    .temporary(),
            };
            telemetry::renewal(scheme, "error");
            if failed.kind() == ErrorKind::Unsupported {
                // A refusal no retry changes (a lease longer than the store keeps): the
                // grant is left to the lease it has.
                self.mark_lost("the store refused to keep it that long");
                return Err(failed);
            }
            if Instant::now() + pause >= safe_until {
                break failed;
            }
            tracing::debug!(lock = %self.handle.name, error = %failed, "the last renewal failed; trying again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_MOST);
        };
        self.mark_lost("its last renewal failed until its lease ran out");
        Err(Error::new(
            failed.kind(),
            format!("the last renewal failed until the lease ran out ({failed}); the grant ended with it"),
        )
        .with_backend(scheme)
        .with_operation("release"))
    }

    /// Gives up one hold from `Drop`: the release, if due, runs in the background.
    pub(crate) fn release_hold_in_background(self: &Arc<Self>) {
        if self.drop_hold() != Some(true) {
            return;
        }
        self.stop();
        self.release_in_background();
    }

    /// Releases the grant on a task of its own (bounded by the operation timeout).
    pub(crate) fn release_in_background(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(lock = %self.handle.name, "no runtime to release on; the lease will expire");
            return;
        };
        let core = Arc::clone(self);
        let cleanup = core
            .client
            .cleanups
            .start_background_release(core.handle.clone(), core.grant.session.is_some());
        runtime.spawn(async move {
            let _cleanup = cleanup;
            let release = core.client.backend.release(&core.handle);
            match tokio::time::timeout(core.plan.op_timeout, release).await {
                Ok(Ok(_)) => core.mark_released(),
                Ok(Err(err)) => {
                    tracing::warn!(lock = %core.handle.name, error = %err, "background release failed; the lease will expire")
                }
                Err(_) => {
                    tracing::warn!(lock = %core.handle.name, "background release got no answer; the lease will expire")
                }
            }
        });
    }
}
