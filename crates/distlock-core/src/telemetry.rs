//! Metric names and recording helpers, so every backend reports the same series.
//!
//! Series (all labelled with `backend`):
//! * `distlock_acquire_total` (counter, `outcome` = granted | busy | timeout | error)
//! * `distlock_acquire_wait_seconds` (histogram)
//! * `distlock_hold_seconds` (histogram)
//! * `distlock_renewals_total` (counter, `outcome` = ok | not_held | error)
//! * `distlock_leases_lost_total` (counter)
//! * `distlock_renewal_batches_total` (counter) and `distlock_renewal_batch_size` (histogram)

use std::time::Duration;

pub(crate) fn acquire(backend: &'static str, outcome: &'static str, waited: Duration) {
    metrics::counter!("distlock_acquire_total", "backend" => backend, "outcome" => outcome)
        .increment(1);
    metrics::histogram!("distlock_acquire_wait_seconds", "backend" => backend)
        .record(waited.as_secs_f64());
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
