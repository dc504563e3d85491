//! How long a grant is safe to use: its TTL, less what the clocks may have drifted.

use std::time::Duration;

use tokio::time::Instant;

/// Part of the TTL assumed lost to clock-rate drift between client and server.
const CLOCK_DRIFT: f64 = 0.01;
/// Fixed safety margin subtracted from every lease.
const SAFETY_MARGIN: Duration = Duration::from_millis(2);

/// The latest moment a lease granted for `ttl` to a request sent at `sent` is safe to use:
/// 1 % of it is assumed lost to clock-rate drift between client and server, and 2 ms to
/// margin. Session backends derive a session's `valid_until` the same way, from the start
/// of the last request the server answered and the session timeout.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let sent = tokio::time::Instant::now();
/// let until = distlock_core::backend::safe_deadline(sent, Duration::from_secs(10));
/// assert!(until > sent && until < sent + Duration::from_secs(10));
/// ```
pub fn safe_deadline(sent: Instant, ttl: Duration) -> Instant {
    let usable = ttl.mul_f64(1.0 - CLOCK_DRIFT).saturating_sub(SAFETY_MARGIN);
    sent.checked_add(usable).unwrap_or(sent)
}

/// An instant no grant outlives (thirty years on), for deadlines that are no limit.
pub(crate) fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(30 * 365 * 24 * 60 * 60))
        .unwrap_or(now)
}
