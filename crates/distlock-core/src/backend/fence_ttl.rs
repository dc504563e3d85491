//! How long a lock's fencing counter is kept (`fence_ttl` in a lock URL: on SQL databases
//! from its last grant, for their counter per name, without which a service that locks
//! `orders/<id>` would grow the store by one counter per order, for ever; on Redis, whose
//! names share their cluster slot's counter, from when that was seeded). A counter
//! that is gone is seeded again from the server's clock in microseconds, which is above
//! every token it handed out, so tokens still only increase.

use std::time::Duration;

use crate::error::{Error, Result};

/// How long an idle fencing counter is kept when the URL's `fence_ttl` says nothing: a day.
pub const DEFAULT_FENCE_TTL: Duration = Duration::from_secs(24 * 3600);

/// The shortest `fence_ttl`: a counter seeded again one second after it was last seeded or
/// granted, from the server's clock in microseconds, is above every token it handed out (a million
/// grants a second on one counter is far beyond any server).
pub const MIN_FENCE_TTL: Duration = Duration::from_secs(1);

/// The longest `fence_ttl`: ten years, as `10y` reads (a year of 365.25 days).
pub const MAX_FENCE_TTL: Duration = Duration::from_secs(315_576_000);

/// Refuses a `fence_ttl` out of range ([`MIN_FENCE_TTL`] to [`MAX_FENCE_TTL`]).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::check_fence_ttl;
/// assert!(check_fence_ttl(Duration::from_secs(3600)).is_ok());
/// assert!(check_fence_ttl(Duration::from_millis(10)).is_err());
/// ```
pub fn check_fence_ttl(fence_ttl: Duration) -> Result<()> {
    match (MIN_FENCE_TTL..=MAX_FENCE_TTL).contains(&fence_ttl) {
        true => Ok(()),
        false => Err(Error::invalid(format!(
            "fence_ttl {fence_ttl:?} is not from 1s to 10 years"
        ))),
    }
}

/// Parses a `fence_ttl` parameter's value (e.g. `1d`) and checks its range.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::parse_fence_ttl;
/// assert_eq!(parse_fence_ttl("1h")?, Duration::from_secs(3600));
/// // The bounds themselves are allowed, as written.
/// assert_eq!(parse_fence_ttl("1s")?, Duration::from_secs(1));
/// assert!(parse_fence_ttl("10y").is_ok());
/// assert!(parse_fence_ttl("999ms").is_err());
/// assert!(parse_fence_ttl("10y 1s").is_err());
/// assert!(parse_fence_ttl("10ms").is_err());
/// assert!(parse_fence_ttl("forever").is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn parse_fence_ttl(value: &str) -> Result<Duration> {
    let fence_ttl = humantime::parse_duration(value)
        .map_err(|_| Error::invalid(format!("fence_ttl `{value}` is not a duration, e.g. 1d")))?;
    check_fence_ttl(fence_ttl)?;
    Ok(fence_ttl)
}
