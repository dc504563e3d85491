//! A waiter's side of a hand-off: a release that frees a lock grants it at once to the
//! first waiter in the queue and tells its client (see [`Handovers`](super::Handovers)),
//! so the lock changes hands in one trip, the release's, instead of a release and the
//! woken waiter's own try. The grant's first lease is a short claim (`handoff_claim`),
//! which the waiter confirms with its first renewal; a waiter that died is passed over
//! (nobody listens on its client's channel), and one that stopped lets the claim lapse,
//! which the waiter behind it, told to watch, finds and takes over.

use std::time::Duration;

use distlock_core::backend::{HandedOver, LockRequest, PollOutcome, Ticket};
use tokio::time::Instant;

use super::RedisBackend;
use super::handovers::News;
use super::refused::RedisTicket;
use crate::keys::Key;

impl RedisBackend {
    /// The grant a release handed `ticket`, if one came and its claim leaves the time to
    /// confirm it: at least half of it. Its lease runs from no earlier than the ticket's
    /// last refused poll was sent, plus what the server's clock counted from that refusal
    /// to the grant. A grant that came too late is left to the next poll, which renews it
    /// for the TTL if it is still there (the acquire script answers a grant already made
    /// under the token so).
    pub(super) fn handed_over(&self, ticket: &mut Ticket) -> Option<PollOutcome> {
        let token = &ticket.request.token;
        let Some(News::Granted { fence, server_ms }) = self.handovers.take(token) else {
            return None;
        };
        let (sent, refused_ms) = ticket.state::<RedisTicket>()?.last_refused?;
        let from = sent + Duration::from_millis(server_ms.saturating_sub(refused_ms));
        let claim = self.claim_for(&ticket.request);
        if claim.is_zero() || from + claim / 2 <= Instant::now() {
            return None;
        }
        self.wakers.forget(token);
        RedisTicket::stop_waiting(ticket);
        Some(PollOutcome::handed_over(
            fence,
            HandedOver { from, lasts: claim },
        ))
    }

    /// How long a grant handed to `request` stays unconfirmed: the client's claim, or the
    /// request's TTL where that is shorter (a lock handed over outlives no lease it asked
    /// for).
    pub(super) fn claim_for(&self, request: &LockRequest) -> Duration {
        self.handoff_claim.min(request.ttl)
    }

    /// Waits for a wake-up of `ticket`, or `backstop`. Told that the waiter ahead was
    /// handed the lock, it waits on until that grant's claim would have lapsed unconfirmed,
    /// and then, unless the lock is held (the claim was confirmed), returns to poll.
    pub(super) async fn wait_for_news(&self, ticket: &Ticket, backstop: Option<Duration>) {
        let until = backstop.map(|backstop| Instant::now() + backstop);
        loop {
            let left = until.map(|until| until.saturating_duration_since(Instant::now()));
            self.wakers.wait(ticket, left).await;
            let Some(News::Watch { at }) = self.handovers.grant_or_watch(&ticket.request.token)
            else {
                return;
            };
            let look_at = until.map_or(at, |until| until.min(at));
            let woken = tokio::time::timeout_at(look_at, self.wakers.wait(ticket, None)).await;
            if woken.is_ok() || until.is_some_and(|until| Instant::now() >= until) {
                return;
            }
            if !self.lock_is_held(&ticket.request.name).await {
                return;
            }
        }
    }

    /// Whether lock `name`'s exclusive key is there (held, or a claim not yet lapsed);
    /// false where the server cannot say.
    pub(crate) async fn lock_is_held(&self, name: &str) -> bool {
        let Ok(keys) = self.keys(name) else {
            return false;
        };
        let left: redis::RedisResult<i64> = redis::cmd("PTTL")
            .arg(keys.named(Key::Lock))
            .query_async(&mut self.conn_for(name))
            .await;
        matches!(left, Ok(ms) if ms > 0 || ms == -1)
    }
}
