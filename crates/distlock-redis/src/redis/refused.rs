//! What a Redis ticket remembers, and how a refused request waits: for a wake-up, or,
//! behind a lock a client other than distlock holds, with a backoff and, where the server
//! publishes keyspace events, a watch of the lock's key.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{LockRequest, Ticket};
use tokio::time::Instant;

use super::RedisBackend;
use crate::foreign::ForeignBackoff;

/// What a Redis ticket remembers (a ticket keeps one state, so all of it is here).
#[derive(Default)]
pub(super) struct RedisTicket {
    /// Whether its waiting request has queued itself, so its polls go to the full script
    /// (the fast path serves only requests nobody queued).
    pub(super) queued: bool,
    /// How it waits on a lock a foreign client holds.
    foreign: ForeignBackoff,
    /// Its last poll was refused for a lock a foreign client holds.
    refused_for_foreign: bool,
    /// The least fencing token its grant may take, where a RedLock set one for all its
    /// masters' tries (see [`ticket_for_master`]).
    pub(super) token_floor: Option<u64>,
    /// Its place in the queue, where a RedLock set one for all its masters (see
    /// [`ticket_for_master`]).
    pub(super) queue_order: Option<u64>,
    /// When its last refused poll was sent, and the server's clock (ms) as it refused it:
    /// a grant handed over later, stamped with the server's clock, was made no earlier
    /// than that much after the poll was sent.
    pub(super) last_refused: Option<(Instant, u64)>,
    /// The fencing token of a grant made by the first try (see `first_try`), whose holder
    /// record lacks it until a renewal writes it in.
    pub(super) unrecorded_fence: Option<u64>,
    /// The request's holder record as the acquire fast path takes it (see
    /// [`RequestRecord::to_grant_head`](crate::record::RequestRecord::to_grant_head)), where a RedLock encoded it once for all its
    /// masters' tries.
    pub(super) grant_head: Option<Arc<str>>,
}

/// A ticket for one master's try of a RedLock request whose grant's token is at least
/// `floor` on every master (tried with one floor, the masters give one token, and none
/// needs stamping with the token agreed on afterwards), and which waits, if it waits, at
/// place `queue_order` of every master's queue (the same number on each, so that every
/// master puts the same waiter first). `grant_head` is the request's holder record as the
/// acquire fast path takes it, encoded once for every master.
pub(crate) fn ticket_for_master(
    request: LockRequest,
    floor: u64,
    queue_order: u64,
    grant_head: Arc<str>,
) -> Ticket {
    let mut ticket = Ticket::new(request);
    ticket.set_state(RedisTicket {
        token_floor: Some(floor),
        queue_order: Some(queue_order),
        grant_head: Some(grant_head),
        ..RedisTicket::default()
    });
    ticket
}

/// Whether the last poll of `ticket` was refused for a lock a client other than distlock
/// holds (RedLock asks this of each master's try).
pub(crate) fn refused_for_foreign(ticket: &Ticket) -> bool {
    ticket
        .state::<RedisTicket>()
        .is_some_and(|state| state.refused_for_foreign)
}

impl RedisTicket {
    /// Ends the ticket's wait behind a foreign holder (it was granted or withdrawn): its
    /// backoff, and its watch of the key.
    pub(super) fn stop_waiting(ticket: &mut Ticket) {
        if let Some(state) = ticket.state_mut::<RedisTicket>() {
            state.foreign = ForeignBackoff::default();
        }
    }
}

impl RedisBackend {
    /// When a request the acquire script refused polls again, its lock held (by a foreign
    /// client if `foreign`) for `left` more; the ticket notes that it queued itself, if it
    /// waits.
    pub(super) async fn refused(
        &self,
        ticket: &mut Ticket,
        left: Option<Duration>,
        foreign: bool,
    ) -> Option<Duration> {
        // A waiting request the full script refused has taken its place in the queue.
        if ticket.request.wait {
            ticket.state_or_default::<RedisTicket>().queued = true;
        }
        // Only a waiting request keeps its ticket from poll to poll (a try makes a new one,
        // and so does each of a RedLock's tries on its masters: the RedLock backs off
        // itself), so only it can back off, or watch the key.
        let redlock_try = ticket
            .state::<RedisTicket>()
            .is_some_and(|state| state.queue_order.is_some());
        let backs_off = foreign && ticket.request.wait && !redlock_try;
        let watching = match backs_off {
            true => self.watch_key(ticket).await,
            false => None,
        };
        let state = ticket.state_or_default::<RedisTicket>();
        state.refused_for_foreign = foreign;
        let backoff = &mut state.foreign;
        let lease_end = left.unwrap_or(Duration::MAX);
        match (backs_off, watching) {
            // Subscribed just now: a release before it would go unseen, so look.
            (true, Some(true)) => Some(Duration::ZERO),
            // The key's release wakes a watching waiter at once, and it polls on the backoff
            // all the same: woken, it races the releasing client's own next try, which
            // wins whenever the waiter's process is slow to run (a loaded machine), and
            // the polls catch the holds that follow. The core polls a millisecond after
            // `retry_within` (past a lease's end); the backoff is the whole interval.
            (true, _) => Some(
                backoff
                    .next(left)
                    .saturating_sub(Duration::from_millis(1))
                    .min(lease_end),
            ),
            (false, _) => {
                backoff.restart();
                left
            }
        }
    }

    /// Makes a waiting request that found a foreign client holding its lock watch the
    /// lock's key for keyspace events, where the server publishes them: `Some(true)` if it
    /// started watching now, `Some(false)` if it already did, `None` if it cannot.
    async fn watch_key(&self, ticket: &mut Ticket) -> Option<bool> {
        let keyspace = self.keyspace.as_ref()?;
        if ticket
            .state::<RedisTicket>()
            .is_some_and(|state| state.foreign.watch.is_some())
        {
            return Some(false);
        }
        if keyspace.ask_due() {
            let mut conn = self.any_conn();
            let asked: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("notify-keyspace-events")
                .query_async(&mut conn)
                .await;
            match asked {
                Ok(setting) => keyspace.answered(setting.get(1).map_or("", String::as_str)),
                Err(err) => {
                    tracing::debug!(error = %err, "cannot read notify-keyspace-events; polling foreign holders");
                    keyspace.answered("");
                }
            }
        }
        if !keyspace.published() {
            return None;
        }
        let key = format!("{}{}", self.prefix, ticket.request.name);
        let watch = keyspace.watch(&key, &ticket.request.token).await?;
        ticket.state_or_default::<RedisTicket>().foreign.watch = Some(watch);
        Some(true)
    }
}
