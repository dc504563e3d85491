//! The lifetime of fencing counters: every backend keeps one counter row per lock name, so
//! a service locking `orders/<id>` would grow the table by a row per order, for ever. A
//! counter never falls below the clock in microseconds at its last grant, so a counter
//! below the clock less `fence_ttl` has been idle at least that long: a client deletes such
//! rows when it connects, at most [`SWEEP_LIMIT`] at a time, and a later grant seeds the
//! name's counter again from the clock, above every token it gave.

use std::time::Duration;

/// The most idle counters one client deletes when it connects.
pub(crate) const SWEEP_LIMIT: i64 = 10_000;

/// `fence_ttl` in microseconds, for SQL that subtracts it from the database's clock.
pub(crate) fn ttl_us(fence_ttl: Duration) -> i64 {
    i64::try_from(fence_ttl.as_micros()).unwrap_or(i64::MAX)
}

/// The counter value below which a counter has been idle for `fence_ttl`, by this
/// process's clock (SQLite's, whose clients share one machine).
#[cfg(feature = "sqlite")]
pub(crate) fn idle_below(fence_ttl: Duration) -> i64 {
    crate::lease_table::now_ms()
        .saturating_mul(1000)
        .saturating_sub(ttl_us(fence_ttl))
}
