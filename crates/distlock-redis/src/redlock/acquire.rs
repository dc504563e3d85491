//! A RedLock acquire: one try on every master at once, granted where a majority grant and
//! agree on a fencing token; a waiting request that is refused waits in every master's
//! queue, at the same place in each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use distlock_core::Result;
use distlock_core::backend::{Backend, PollOutcome, Ticket};
use rand::Rng;

use super::backend::{MAX_RETRY_DELAY, RedlockBackend, grant_of};
use super::connect::Master;
use super::fanout::Answers;
use crate::foreign::ForeignBackoff;
use crate::record::RequestRecord;
use crate::redis::{LetGo, clock_floor, refused_for_foreign, ticket_for_master};

/// What a RedLock ticket remembers (a ticket keeps one state, so all of it is here).
#[derive(Default)]
struct RedlockTicket {
    /// How it waits while a foreign RedLock client (rslock, redsync, …) holds the lock.
    foreign: ForeignBackoff,
    /// Its place in every master's queue: this client's clock, in microseconds, when it
    /// first tried. Every master orders its waiters by it, so a release on any hands the
    /// lock to the same waiter where the waiters reached every master.
    queue_order: Option<u64>,
    /// How many of its tries in a row were granted on too few masters.
    splits: u32,
}

impl RedlockBackend {
    /// One try of `ticket` on every master.
    pub(super) async fn try_masters(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let request = ticket.request.clone();
        let request = &request;
        let started = Instant::now();
        let timeout = self.node_timeout(request.ttl);
        // One floor for every master's try, so that masters whose counters are behind it
        // give one token (none to stamp afterwards).
        let floor = clock_floor();
        // The holder record, encoded once for every master's try.
        let grant_head: Arc<str> = RequestRecord::of(request).to_grant_head()?.into();
        let queue_order = *ticket
            .state_or_default::<RedlockTicket>()
            .queue_order
            .get_or_insert(floor);
        // A master that grants after the majority was counted holds the same grant: if it
        // gave another token, it is stamped with the one the holder is given, once that is
        // decided (so adopting and breaking the grant by its token find it there too). One granted after a try that failed is left: the request's next try
        // (same token) finds it its own.
        let (decided, token_of_grant) = tokio::sync::watch::channel(None::<u64>);
        let late = {
            let (name, token) = (request.name.clone(), request.token.clone());
            move |master: Arc<Master>, answer: PollOutcome| {
                let (name, token) = (name.clone(), token.clone());
                let mut token_of_grant = token_of_grant.clone();
                async move {
                    let decided = tokio::time::timeout(
                        Duration::from_secs(5),
                        token_of_grant.wait_for(Option::is_some),
                    )
                    .await
                    .ok()
                    .and_then(|decided| decided.ok().and_then(|token| *token));
                    let (Some(value), Ok(backend)) = (decided, master.ready()) else {
                        return;
                    };
                    // Granted on a majority: a late try that queued the request here left
                    // it a wake-up slot, which nothing else would forget.
                    backend.forget_waiter(&token);
                    let PollOutcome::Granted {
                        fencing_token: given,
                        ..
                    } = answer
                    else {
                        return;
                    };
                    if given == value {
                        return;
                    }
                    if let Err(err) = backend.restamp(&name, &token, value).await {
                        tracing::debug!(error = %err, "stamping a late RedLock grant failed");
                    }
                }
            }
        };
        let granted = |answers: &Answers<PollOutcome>| {
            let granted = answers.iter().flatten();
            granted
                .filter(|a| matches!(a, PollOutcome::Granted { .. }))
                .count()
                >= self.quorum
        };
        // How many masters refused it for a lock a client other than distlock holds.
        let foreign = Arc::new(AtomicUsize::new(0));
        let answers = self
            .on_all_until(
                timeout,
                |master| {
                    let mut attempt =
                        ticket_for_master(request.clone(), floor, queue_order, grant_head.clone());
                    let foreign = foreign.clone();
                    async move {
                        let answer = master.ready()?.poll(&mut attempt).await?;
                        if refused_for_foreign(&attempt) {
                            foreign.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(answer)
                    }
                },
                granted,
                late,
            )
            .await;
        let fences: Vec<(usize, u64)> = answers
            .iter()
            .enumerate()
            .filter_map(|(at, a)| match a {
                Some(PollOutcome::Granted { fencing_token, .. }) => Some((at, *fencing_token)),
                _ => None,
            })
            .collect();
        let holder_left = answers
            .iter()
            .flatten()
            .filter_map(|a| match a {
                PollOutcome::Pending { retry_within, .. } => *retry_within,
                _ => None,
            })
            .min();
        if let Some(token) = self
            .agree_on_token(&fences, request, started, timeout)
            .await
        {
            let _ = decided.send(Some(token));
            for master in self.masters.iter().filter_map(|master| master.ready().ok()) {
                master.forget_waiter(&request.token);
            }
            return Ok(PollOutcome::granted(token));
        }
        // Granted on too few masters (the masters' heads differ, a release has not reached
        // them all, or a master missed the holder's grant): given back where granted (a
        // master that granted a hand-off since keeps it), and tried again after a random
        // pause, longer after each split in a row (a master that missed the holder's grant
        // splits every try until the holder lets go).
        let split = !fences.is_empty();
        if split {
            let granted: Vec<usize> = fences.iter().map(|(at, _)| *at).collect();
            self.let_go_on(&granted, &grant_of(request), LetGo::GiveBack, timeout)
                .await;
        }
        self.quorum_of("acquire", &answers)?;
        // Foreign clients retry within milliseconds and wake nobody when they release: a
        // waiter behind one polls from a millisecond up, as on one Redis server (the core
        // polls a millisecond after `retry_within`). A waiter behind distlock holders is
        // woken by their releases (see `wait_for_wakes`), and looks again when their lease
        // ends; after a split, or for a request that does not wait, a random pause.
        let state = ticket.state_or_default::<RedlockTicket>();
        state.splits = if split { state.splits + 1 } else { 0 };
        let splits = state.splits;
        let backoff = &mut state.foreign;
        let retry_within = match foreign.load(Ordering::Relaxed) > 0 && request.wait {
            true => backoff
                .next(holder_left)
                .saturating_sub(Duration::from_millis(1))
                .min(holder_left.unwrap_or(Duration::MAX)),
            false => {
                backoff.restart();
                match request.wait && !split {
                    true => holder_left.unwrap_or(MAX_RETRY_DELAY),
                    false => retry_delay(holder_left, splits),
                }
            }
        };
        Ok(PollOutcome::pending(Some(retry_within)))
    }
}

/// A pause before trying again, spread so that contenders do not retry in step: at most
/// [`MAX_RETRY_DELAY`], doubled for each split in a row after the first up to 32 times it,
/// and no longer than the holder's time left.
fn retry_delay(holder_left: Option<Duration>, splits: u32) -> Duration {
    let longest = MAX_RETRY_DELAY * (1 << splits.saturating_sub(1).min(5));
    let most = holder_left.map_or(longest, |left| left.min(longest));
    let most_ms = most.as_millis().max(2) as u64;
    Duration::from_millis(rand::rng().random_range(1..=most_ms))
}
