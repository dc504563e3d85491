//! Duration parameters of lock URLs (`busy_timeout`, `connect_timeout`, `session_timeout`):
//! parsed, checked against the range the store can keep, and refused with both bounds.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::error::{Error, Result};

/// The URL parameter `name`'s `value` as a duration within `range`; otherwise an
/// `InvalidInput` error that names the parameter, the value and the range.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::duration_within;
/// let range = Duration::ZERO..=Duration::from_secs(3600);
/// assert_eq!(duration_within("busy_timeout", "5s", range.clone())?, Duration::from_secs(5));
/// let err = duration_within("busy_timeout", "25days", range.clone()).unwrap_err();
/// assert_eq!(err.message(), "busy_timeout `25days` is not a duration from 0s to 1h");
/// assert!(duration_within("busy_timeout", "soon", range).is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn duration_within(
    name: &str,
    value: &str,
    range: RangeInclusive<Duration>,
) -> Result<Duration> {
    humantime::parse_duration(value)
        .ok()
        .filter(|duration| range.contains(duration))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{name} `{value}` is not a duration from {} to {}",
                humantime::format_duration(*range.start()),
                humantime::format_duration(*range.end())
            ))
        })
}
