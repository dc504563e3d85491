//! Options that shape one acquisition: lease length, wait deadline, renewal, fairness and
//! reentrancy.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::owner::Owner;

/// The default lease length.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The shortest lease accepted: anything shorter cannot be renewed in time.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest lease accepted. Longer holds should renew a shorter lease instead.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The shortest renewal period accepted: shorter ones would keep a task renewing non-stop.
pub const MIN_RENEW_EVERY: Duration = Duration::from_millis(10);
/// The shortest operation timeout accepted: a server on loopback answers within it, and a
/// shorter one would fail every release and leave the grant to lapse.
pub const MIN_OP_TIMEOUT: Duration = Duration::from_millis(10);
/// The longest default operation timeout (see [`LockOptions::op_timeout`]).
pub(crate) const MAX_DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(5);

/// How to acquire a lock: pass to `lock_with`, `read_with`, `write_with` or `acquire_with`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::LockOptions;
///
/// let opts = LockOptions::new()
///     .ttl(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .fair(true)
///     .max_hold(Duration::from_secs(600));
/// assert_eq!(opts.ttl_value(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone)]
pub struct LockOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) auto_renew: bool,
    pub(crate) renew_every: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) fair: bool,
    pub(crate) reentrant: Option<Owner>,
    pub(crate) op_timeout: Option<Duration>,
    pub(crate) on_lost: OnLost,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: DEFAULT_TTL,
            wait: None,
            auto_renew: true,
            renew_every: None,
            max_hold: None,
            fair: false,
            reentrant: None,
            op_timeout: None,
            on_lost: OnLost::Cancel,
        }
    }
}

impl LockOptions {
    /// The defaults: 30 s lease, wait forever, auto-renew every ttl/3, not fair, not
    /// reentrant.
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new();
    /// assert_eq!(opts.ttl_value(), distlock_core::DEFAULT_TTL);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Lease length: how long the grant outlives its holder if the holder stops renewing.
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().ttl(std::time::Duration::from_secs(5));
    /// assert_eq!(opts.ttl_value().as_secs(), 5);
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Deadline for waiting; `Duration::ZERO` means a single attempt. It bounds the whole
    /// acquisition, backend calls in flight included; one too long to count (years) means
    /// no deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().wait(std::time::Duration::from_secs(1));
    /// assert_eq!(opts.wait_value(), Some(std::time::Duration::from_secs(1)));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Wait without a deadline (the default).
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().wait_forever();
    /// assert_eq!(opts.wait_value(), None);
    /// ```
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// Whether a watchdog renews the lease while the guard lives (default on).
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().auto_renew(false);
    /// ```
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }

    /// How often the watchdog renews (default ttl/3; must be shorter than the ttl and no
    /// shorter than [`MIN_RENEW_EVERY`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().renew_every(std::time::Duration::from_secs(5));
    /// ```
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// Stop renewing after this long, so no forgotten guard holds a lock forever.
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().max_hold(std::time::Duration::from_secs(3600));
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Grant strictly in arrival order (FIFO).
    ///
    /// # Examples
    ///
    /// ```
    /// let opts = distlock_core::LockOptions::new().fair(true);
    /// ```
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// Make the acquisition reentrant for `owner`: while `owner` holds the lock through this
    /// client, acquiring it again with the same owner succeeds at once and shares the grant;
    /// the lock is released when the last guard goes.
    ///
    /// # Examples
    ///
    /// ```
    /// let owner = distlock_core::Owner::random();
    /// let opts = distlock_core::LockOptions::new().reentrant(owner);
    /// ```
    pub fn reentrant(mut self, owner: Owner) -> Self {
        self.reentrant = Some(owner);
        self
    }

    /// How long a release, a renewal asked for by hand, or a single attempt (`try_lock`)
    /// may wait for the backend before failing with a temporary
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) error. Default: a third of
    /// the TTL, at most 5 s; at least [`MIN_OP_TIMEOUT`]. (Waits are bounded by
    /// [`LockOptions::wait`], renewals by the watchdog's own schedule.)
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = distlock_core::LockOptions::new().op_timeout(Duration::from_secs(2));
    /// assert_eq!(opts.op_timeout_value(), Duration::from_secs(2));
    /// assert_eq!(distlock_core::LockOptions::new().op_timeout_value(), Duration::from_secs(5));
    /// ```
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }

    /// What a template ([`Mutex::with_lock`](crate::Mutex::with_lock) and its kin) does
    /// with its closure when the lease is lost while it runs: drop it and return
    /// `LockLost` ([`OnLost::Cancel`], the default), or let it run on
    /// ([`OnLost::Signal`]).
    ///
    /// # Examples
    ///
    /// See [`OnLost`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// What a template does on a lost lease.
    ///
    /// # Examples
    ///
    /// See [`OnLost`].
    pub fn on_lost_value(&self) -> OnLost {
        self.on_lost
    }

    /// The operation timeout in force (see [`LockOptions::op_timeout`]).
    ///
    /// # Examples
    ///
    /// See [`LockOptions::op_timeout`].
    pub fn op_timeout_value(&self) -> Duration {
        self.op_timeout
            .unwrap_or_else(|| (self.ttl / 3).min(MAX_DEFAULT_OP_TIMEOUT))
    }

    /// The configured lease length.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::LockOptions::new().ttl_value().as_secs(), 30);
    /// ```
    pub fn ttl_value(&self) -> Duration {
        self.ttl
    }

    /// The configured wait deadline (`None`: wait forever).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::LockOptions::new().wait_value(), None);
    /// ```
    pub fn wait_value(&self) -> Option<Duration> {
        self.wait
    }

    /// The interval the watchdog renews at.
    pub(crate) fn renew_interval(&self) -> Duration {
        self.renew_every.unwrap_or(self.ttl / 3)
    }

    /// Checks the options, naming the first thing that is wrong: the check every acquire
    /// makes first, for a caller that would refuse bad options before connecting to a store
    /// that may be down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use distlock_core::{ErrorKind, LockOptions};
    ///
    /// assert!(LockOptions::new().validate().is_ok());
    /// let huge = LockOptions::new().ttl(Duration::from_secs(1_000 * 365 * 86_400));
    /// assert_eq!(huge.validate().unwrap_err().kind(), ErrorKind::InvalidInput);
    /// ```
    pub fn validate(&self) -> Result<()> {
        if self.ttl.is_zero() {
            return Err(Error::invalid("ttl must not be zero"));
        }
        if self.ttl < MIN_TTL {
            return Err(Error::invalid(format!(
                "ttl {:?} is shorter than the minimum {:?}",
                self.ttl, MIN_TTL
            )));
        }
        if self.ttl > MAX_TTL {
            return Err(Error::invalid(format!(
                "ttl {:?} is longer than the maximum {:?}; hold longer by renewing a shorter lease",
                self.ttl, MAX_TTL
            )));
        }
        if let Some(every) = self.renew_every
            && (every < MIN_RENEW_EVERY || every >= self.ttl)
        {
            return Err(Error::invalid(format!(
                "renew_every {every:?} must be at least {MIN_RENEW_EVERY:?} and below the ttl {:?}",
                self.ttl
            )));
        }
        if self.max_hold.is_some_and(|m| m.is_zero()) {
            return Err(Error::invalid("max_hold must not be zero"));
        }
        if let Some(timeout) = self.op_timeout.filter(|t| *t < MIN_OP_TIMEOUT) {
            return Err(Error::invalid(format!(
                "op_timeout {timeout:?} is shorter than the minimum {MIN_OP_TIMEOUT:?}"
            )));
        }
        Ok(())
    }
}

/// What a template does with its closure when the lease is lost while the closure runs.
///
/// # Examples
///
/// ```
/// use distlock_core::{LockOptions, OnLost};
/// let options = LockOptions::new().on_lost(OnLost::Signal);
/// assert_eq!(options.on_lost_value(), OnLost::Signal);
/// assert_eq!(LockOptions::new().on_lost_value(), OnLost::Cancel);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLost {
    /// Drop the closure's future at once (at its next `.await`) and return
    /// [`ErrorKind::LockLost`](crate::ErrorKind::LockLost). Work it did before is not undone: fence its writes.
    #[default]
    Cancel,
    /// Let the closure run on; it watches [`Held::lost`](crate::Held::lost) or [`Held::health`](crate::Held::health) itself.
    Signal,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn zero_short_and_huge_ttls_are_rejected() {
        for ttl in [Duration::ZERO, Duration::from_millis(1), MAX_TTL * 2] {
            let err = LockOptions::new().ttl(ttl).validate().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ttl:?}");
        }
        assert!(LockOptions::new().validate().is_ok());
    }

    #[test]
    fn renewal_periods_below_the_floor_are_rejected() {
        for every in [Duration::from_nanos(1), Duration::from_millis(9)] {
            let opts = LockOptions::new().renew_every(every);
            let err = opts.validate().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{every:?}");
        }
        assert!(
            LockOptions::new()
                .renew_every(MIN_RENEW_EVERY)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn renewal_must_come_before_expiry() {
        let opts = LockOptions::new()
            .ttl(Duration::from_secs(3))
            .renew_every(Duration::from_secs(3));
        assert_eq!(opts.validate().unwrap_err().kind(), ErrorKind::InvalidInput);
    }
}
