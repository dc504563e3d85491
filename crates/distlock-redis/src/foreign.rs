//! Waiting on a lock another library's client holds.

use std::time::Duration;

use tokio::time::Instant;

use crate::redis::channels::Watch;

/// How a request waits on a lock a foreign client holds (redis-py, redsync, rslock, …),
/// whose release publishes no wake-up: polls with jittered backoff from about 1 ms,
/// doubling to at most 50 ms while one holder keeps the lock, and from 1 ms again once the
/// lock has changed hands, as those clients themselves retry every few milliseconds. So a
/// distlock waiter gets its share instead of sleeping on the holder's TTL, and a long hold
/// is not polled hard.
///
/// The lock changed hands when its time left is more than the last poll saw, less the
/// time since: a new hold started after the one seen before. (The time left alone, read in
/// whole milliseconds, often reads the same across a quick hand-off.)
///
/// Where the server publishes keyspace events, the request also watches the lock's key,
/// and its release wakes it (see [`crate::redis::keyspace`]).
#[derive(Default)]
pub(crate) struct ForeignBackoff {
    /// Polls made while the same holder kept the lock.
    polls: u32,
    /// The holder's time left at the last poll (`None`: a key with no expiry), and when.
    last: Option<(Option<Duration>, Instant)>,
    /// The request's watch of the lock's key, while it has one.
    pub(crate) watch: Option<Watch>,
}

impl ForeignBackoff {
    const FIRST: Duration = Duration::from_millis(1);
    /// The longest wait between polls.
    pub(crate) const LONGEST: Duration = Duration::from_millis(50);
    /// What a time left read in whole milliseconds may be off by, both readings together.
    const ROUNDING: Duration = Duration::from_millis(1);

    /// Starts the backoff afresh (the lock is held by distlock, or free), keeping the
    /// watch of the key.
    pub(crate) fn restart(&mut self) {
        self.polls = 0;
        self.last = None;
    }

    /// The wait before the next poll, seeing the holder with `left` of its lease left
    /// (`None`: no expiry): between half and all of 1 ms doubled per poll of the same hold.
    pub(crate) fn next(&mut self, left: Option<Duration>) -> Duration {
        let now = Instant::now();
        if let Some((last_left, at)) = self.last {
            let expected = last_left.map(|l| l.saturating_sub(now - at));
            let new_hold = match (left, expected) {
                (Some(left), Some(expected)) => left > expected + Self::ROUNDING,
                (None, None) => false,
                _ => true,
            };
            if new_hold {
                self.polls = 0;
            }
        }
        self.last = Some((left, now));
        let full = Self::FIRST
            .saturating_mul(1 << self.polls.min(6))
            .min(Self::LONGEST);
        self.polls = self.polls.saturating_add(1);
        full.mul_f64(rand::random_range(0.5..=1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_S: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn one_long_hold_is_polled_less_and_less_up_to_the_limit() {
        let mut backoff = ForeignBackoff::default();
        let mut left = TEN_S;
        let mut waits = Vec::new();
        for _ in 0..10 {
            let wait = backoff.next(Some(left));
            waits.push(wait);
            tokio::time::advance(wait).await;
            left -= wait;
        }
        assert!(waits[0] <= Duration::from_millis(1));
        assert!(waits[9] >= Duration::from_millis(25) && waits[9] <= Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hand_off_starts_again_at_a_millisecond_though_the_time_left_reads_the_same() {
        let mut backoff = ForeignBackoff::default();
        let mut left = TEN_S;
        for _ in 0..5 {
            backoff.next(Some(left));
            tokio::time::advance(Duration::from_millis(4)).await;
            left -= Duration::from_millis(4);
        }
        // The next holder took it 3 ms ago with the same TTL: its time left reads more
        // than the first holder's would be now.
        let wait = backoff.next(Some(TEN_S - Duration::from_millis(3)));
        assert!(wait <= Duration::from_millis(1), "{wait:?}");
    }
}
