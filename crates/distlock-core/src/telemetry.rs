//! Metric names and recording helpers, so every backend reports the same series.
//!
//! Series (all labelled with `backend`):
//! * `distlock_acquire_total` (counter, `outcome` = granted | busy | timeout | error)
//! * `distlock_acquire_wait_seconds` (histogram)
//! * `distlock_hold_seconds` (histogram)
//! * `distlock_renewals_total` (counter, `outcome` = ok | not_held | error)
//! * `distlock_leases_lost_total` (counter)
//! * `distlock_renewal_batches_total` (counter) and `distlock_renewal_batch_size` (histogram)
//! * `distlock_acquire_retries_total` (counter): temporary errors an acquire retried
//! * `distlock_job_runs_total` (counter, `outcome` = ran | busy | too_soon | failed | panicked |
//!   lost)
//!   and `distlock_job_duration_seconds` (histogram, runs whose body started)
//! * `distlock_leaderships_total` (counter, `outcome` = won | lost)

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one warning about retried errors per this period, per process.
const RETRY_WARNING_EVERY: Duration = Duration::from_secs(10);

pub(crate) fn acquire(backend: &'static str, outcome: &'static str, waited: Duration) {
    metrics::counter!("distlock_acquire_total", "backend" => backend, "outcome" => outcome)
        .increment(1);
    metrics::histogram!("distlock_acquire_wait_seconds", "backend" => backend)
        .record(waited.as_secs_f64());
}

pub(crate) fn job_run(backend: &'static str, outcome: &'static str, ran: Option<Duration>) {
    metrics::counter!("distlock_job_runs_total", "backend" => backend, "outcome" => outcome)
        .increment(1);
    if let Some(ran) = ran {
        metrics::histogram!("distlock_job_duration_seconds", "backend" => backend)
            .record(ran.as_secs_f64());
    }
}

pub(crate) fn hold(backend: &'static str, held: Duration) {
    metrics::histogram!("distlock_hold_seconds", "backend" => backend).record(held.as_secs_f64());
}

pub(crate) fn renewal(backend: &'static str, outcome: &'static str) {
    metrics::counter!("distlock_renewals_total", "backend" => backend, "outcome" => outcome)
        .increment(1);
}

pub(crate) fn lost(backend: &'static str) {
    metrics::counter!("distlock_leases_lost_total", "backend" => backend).increment(1);
}

pub(crate) fn renewal_batch(backend: &'static str, size: usize) {
    metrics::counter!("distlock_renewal_batches_total", "backend" => backend).increment(1);
    metrics::histogram!("distlock_renewal_batch_size", "backend" => backend).record(size as f64);
}

/// Counts a temporary error that a waiting acquire retries, and warns about it, at most once
/// every [`RETRY_WARNING_EVERY`] (with how many were retried since the last warning).
pub(crate) fn retry(backend: &'static str, error: &crate::error::Error) {
    metrics::counter!("distlock_acquire_retries_total", "backend" => backend).increment(1);
    static LAST: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    match last.as_mut() {
        Some((at, quiet)) if at.elapsed() < RETRY_WARNING_EVERY => {
            *quiet += 1;
            tracing::debug!(%error, "acquire retrying after a temporary error");
        }
        _ => {
            let quiet = last.map_or(0, |(_, quiet)| quiet);
            *last = Some((Instant::now(), 0));
            tracing::warn!(%error, retried_quietly = quiet, "acquire retrying after a temporary error");
        }
    }
}

pub(crate) fn leadership(backend: &'static str, outcome: &'static str) {
    metrics::counter!("distlock_leaderships_total", "backend" => backend, "outcome" => outcome)
        .increment(1);
}
