//! How a RedLock waiter waits: in every master's queue, at the same place in each, woken by
//! the releases there. A release hands the lock to its master's head waiter for a short
//! claim and tells that waiter's client; the waiter tries once a majority of masters told
//! it (their releases reach the masters at about the same time), so its try confirms the
//! grants they made and is granted in one round trip. Of the waiters behind the head, only
//! the next is told anything: when to look, should the head's claims lapse unconfirmed.

use std::time::Duration;

use distlock_core::backend::Ticket;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::backend::{MAX_RETRY_DELAY, RedlockBackend};
use crate::redis::{MasterWake, RedisBackend};

impl RedlockBackend {
    /// Waits until releases on a majority of masters woke `ticket`; or, once one did, until
    /// the others had the time to (the shorter of `node_timeout`, within which a release's
    /// calls to the masters end, and half the masters' hand-off claim); or until a grant
    /// handed to the waiter ahead would have lapsed unconfirmed, if by then the lock is
    /// not held on a majority; or `backstop`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: wake-ups not yet taken stay for the next wait.
    pub(super) async fn wait_for_wakes(&self, ticket: &Ticket, backstop: Option<Duration>) {
        let masters: Vec<&RedisBackend> = self
            .masters
            .iter()
            .filter_map(|master| master.ready().ok())
            .collect();
        let Some(first) = masters.first() else {
            // No master connected yet: nothing can wake it.
            tokio::time::sleep(backstop.unwrap_or(MAX_RETRY_DELAY)).await;
            return;
        };
        let request = &ticket.request;
        let claim = first.redlock_claim(request);
        let grace = match claim.is_zero() {
            true => self.node_timeout(request.ttl),
            false => self.node_timeout(request.ttl).min(claim / 2),
        };
        let mut until = backstop.map(|backstop| Instant::now() + backstop);
        let mut look_at: Option<Instant> = None;
        let mut waits: FuturesUnordered<_> = masters
            .iter()
            .enumerate()
            .map(|(at, master)| wake_on(at, master, ticket))
            .collect();
        let mut woke = vec![false; masters.len()];
        loop {
            let deadline = [until, look_at].into_iter().flatten().min();
            let next = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, waits.next()).await,
                None => Ok(waits.next().await),
            };
            match next {
                Ok(Some((at, MasterWake::LookAt(when)))) => {
                    look_at = Some(look_at.map_or(when, |earlier| earlier.min(when)));
                    waits.push(wake_on(at, masters[at], ticket));
                }
                Ok(Some((at, MasterWake::Woken))) => {
                    woke[at] = true;
                    if woke.iter().filter(|woke| **woke).count() >= self.quorum {
                        return;
                    }
                    let soon = Instant::now() + grace;
                    until = Some(until.map_or(soon, |until| until.min(soon)));
                    waits.push(wake_on(at, masters[at], ticket));
                }
                Ok(None) => return,
                Err(_) if until.is_some_and(|until| Instant::now() >= until) => return,
                Err(_) => {
                    // The head's claims would have lapsed: worth a try unless the lock is
                    // held (they were confirmed) on a majority.
                    look_at = None;
                    let bound = self.node_timeout(request.ttl);
                    if !self
                        .held_on_a_majority(&masters, &request.name, bound)
                        .await
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Whether lock `name`'s key is there (held, or a claim not lapsed) on a majority of
    /// `masters`, each bounded by `bound` (one that does not answer in time counts as not
    /// holding it).
    async fn held_on_a_majority(
        &self,
        masters: &[&RedisBackend],
        name: &str,
        bound: Duration,
    ) -> bool {
        let held = futures_util::future::join_all(masters.iter().map(|master| async move {
            tokio::time::timeout(bound, master.lock_is_held(name))
                .await
                .unwrap_or(false)
        }))
        .await;
        held.into_iter().filter(|held| *held).count() >= self.quorum
    }
}

/// The next wake-up of `ticket` on master `master` (at `at` among the masters).
async fn wake_on(at: usize, master: &RedisBackend, ticket: &Ticket) -> (usize, MasterWake) {
    (at, master.redlock_wake(ticket).await)
}
