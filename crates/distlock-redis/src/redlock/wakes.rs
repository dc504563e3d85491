//! How a RedLock waiter waits: in every master's queue, at the same place in each, woken by
//! the releases there. A release hands the lock to its master's head waiter for a short
//! claim and tells that waiter's client; the waiter tries once a majority of masters told
//! it (their releases reach the masters at about the same time), so its try confirms the
//! grants they made and is granted in one round trip. Waiters behind the head are not
//! woken: one message per master per release, no herd.

use std::time::Duration;

use distlock_core::backend::Ticket;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::backend::RedlockBackend;
use crate::redis::{MasterWake, RedisBackend};

impl RedlockBackend {
    /// Waits until releases on a majority of masters woke `ticket`; or, once one did, until
    /// the others had the time to answer a call (`node_timeout`: a release's calls to the
    /// masters end within it); or until a grant handed to the waiter ahead would have
    /// lapsed unconfirmed (a master said so); or `backstop`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: wake-ups not yet taken stay for the next wait.
    pub(super) async fn wait_for_wakes(&self, ticket: &Ticket, backstop: Option<Duration>) {
        let mut until = backstop.map(|backstop| Instant::now() + backstop);
        let masters: Vec<&RedisBackend> = self
            .masters
            .iter()
            .filter_map(|master| master.ready().ok())
            .collect();
        if masters.is_empty() {
            // No master connected yet: nothing can wake it.
            tokio::time::sleep(backstop.unwrap_or(super::backend::MAX_RETRY_DELAY)).await;
            return;
        }
        let mut waits: FuturesUnordered<_> = masters
            .iter()
            .enumerate()
            .map(|(at, master)| wake_on(at, master, ticket))
            .collect();
        let mut woken = 0;
        loop {
            let next = match until {
                Some(until) => tokio::time::timeout_at(until, waits.next()).await,
                None => Ok(waits.next().await),
            };
            let Ok(Some((at, wake))) = next else {
                return;
            };
            let look_at = match wake {
                MasterWake::LookAt(at) => at,
                MasterWake::Woken => {
                    woken += 1;
                    if woken >= self.quorum {
                        return;
                    }
                    Instant::now() + self.node_timeout(ticket.request.ttl)
                }
            };
            until = Some(until.map_or(look_at, |until| until.min(look_at)));
            waits.push(wake_on(at, masters[at], ticket));
        }
    }
}

/// The next wake-up of `ticket` on master `master` (at `at` among the masters).
async fn wake_on(at: usize, master: &RedisBackend, ticket: &Ticket) -> (usize, MasterWake) {
    (at, master.redlock_wake(ticket).await)
}
