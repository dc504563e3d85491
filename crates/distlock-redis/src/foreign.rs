//! Waiting on a lock another library's client holds.

use std::time::Duration;

/// How a request waits on a lock a foreign client holds (redis-py, redsync, rslock, …),
/// whose release publishes no wake-up: polls with jittered backoff from about 1 ms,
/// doubling to at most 50 ms while one holder keeps the lock, and from 1 ms again once the
/// lock has changed hands (its time left went up), as those clients themselves retry every
/// few milliseconds. So a distlock waiter gets its share instead of sleeping on the
/// holder's TTL, and a long hold is not polled hard.
#[derive(Default)]
pub(crate) struct ForeignBackoff {
    /// Polls made while the same holder kept the lock.
    polls: u32,
    /// The holder's time left at the last poll (`Some(None)`: a key with no expiry).
    last_left: Option<Option<Duration>>,
}

impl ForeignBackoff {
    const FIRST: Duration = Duration::from_millis(1);
    const LONGEST: Duration = Duration::from_millis(50);

    /// The wait before the next poll, seeing the holder with `left` of its lease left
    /// (`None`: no expiry): between half and all of 1 ms doubled per poll of the same hold.
    pub(crate) fn next(&mut self, left: Option<Duration>) -> Duration {
        if self.last_left.is_some_and(|last| left > last) {
            self.polls = 0;
        }
        self.last_left = Some(left);
        let full = Self::FIRST
            .saturating_mul(1 << self.polls.min(6))
            .min(Self::LONGEST);
        self.polls = self.polls.saturating_add(1);
        full.mul_f64(rand::random_range(0.5..=1.0))
    }
}
