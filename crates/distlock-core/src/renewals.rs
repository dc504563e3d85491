//! Renewals batched per client: watchdogs of leases with the same renewal period renew on a
//! shared grid of instants, and the renewals that arrive together go to the backend as one
//! call of up to [`BATCH`] leases — one round trip where the backend can pipeline — so a
//! process holding many locks does not pay a round trip per lock.
//!
//! The batcher is a task on the runtime of the renewal that started it. A client may outlive
//! that runtime (a program that runs one runtime after another): a renewal that finds the
//! batcher gone starts a new one on its own runtime.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::backend::{BATCH, Backend, Grant, LeaseOutcome};
use crate::error::{Error, ErrorKind, Result};
use crate::telemetry;

/// How long the batcher waits for more renewals once one arrived.
const LINGER: Duration = Duration::from_millis(1);

struct Request {
    grant: Grant,
    ttl: Duration,
    reply: oneshot::Sender<Result<LeaseOutcome>>,
}

pub(crate) struct Renewals {
    backend: Arc<dyn Backend>,
    sender: StdMutex<Option<mpsc::UnboundedSender<Request>>>,
    base: Instant,
}

impl Renewals {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        Renewals {
            backend,
            sender: StdMutex::new(None),
            base: Instant::now(),
        }
    }

    /// Renews one lease as part of whatever batch is forming. A renewal whose batcher went
    /// away with it (its runtime ended) is sent once more, to a new batcher.
    pub(crate) async fn renew(&self, grant: Grant, ttl: Duration) -> Result<LeaseOutcome> {
        for _ in 0..2 {
            let (reply, answer) = oneshot::channel();
            let request = Request {
                grant: grant.clone(),
                ttl,
                reply,
            };
            if self.send(request).is_ok()
                && let Ok(outcome) = answer.await
            {
                return outcome;
            }
        }
        Err(Error::new(ErrorKind::Backend, "the renewal batcher stopped").temporary())
    }

    /// Sends a request to the batcher, first starting one on the current runtime if there
    /// is none, or if the runtime of the last one ended.
    fn send(&self, request: Request) -> std::result::Result<(), ()> {
        let mut sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        if sender.as_ref().is_none_or(|s| s.is_closed()) {
            let (fresh, receiver) = mpsc::unbounded_channel();
            tokio::spawn(batcher(self.backend.clone(), receiver));
            *sender = Some(fresh);
        }
        let sender = sender.as_ref().ok_or(())?;
        sender.send(request).map_err(drop)
    }

    /// When to renew a lease due at `due` with period `every`: the first instant of this
    /// client's grid (steps of `every / 2`) no earlier than half a period before it. Leases
    /// with the same period thus renew together, each at most half a period early.
    pub(crate) fn align(&self, due: Instant, every: Duration) -> Instant {
        let step = every / 2;
        if step.is_zero() {
            return due;
        }
        let earliest = due.checked_sub(step).unwrap_or(due).max(self.base);
        let since = (earliest - self.base).as_nanos();
        let steps = since.div_ceil(step.as_nanos());
        let offset = u64::try_from(steps.saturating_mul(step.as_nanos())).unwrap_or(u64::MAX);
        self.base + Duration::from_nanos(offset)
    }
}

async fn batcher(backend: Arc<dyn Backend>, mut requests: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = requests.recv().await {
        tokio::time::sleep(LINGER).await;
        let mut pending = vec![first];
        while let Ok(more) = requests.try_recv() {
            pending.push(more);
        }
        pending.sort_by_key(|r| r.ttl);
        while !pending.is_empty() {
            let ttl = pending[0].ttl;
            let same = pending
                .iter()
                .take(BATCH)
                .take_while(|r| r.ttl == ttl)
                .count();
            let batch: Vec<Request> = pending.drain(..same).collect();
            // Each batch on its own task: one that hangs must not hold up the others.
            tokio::spawn(renew_batch(backend.clone(), batch, ttl));
        }
    }
}

async fn renew_batch(backend: Arc<dyn Backend>, batch: Vec<Request>, ttl: Duration) {
    telemetry::renewal_batch(backend.scheme(), batch.len());
    let grants: Vec<Grant> = batch.iter().map(|r| r.grant.clone()).collect();
    match backend.renew_many(&grants, ttl).await {
        Ok(outcomes) if outcomes.len() == batch.len() => {
            for (request, outcome) in batch.into_iter().zip(outcomes) {
                let _ = request.reply.send(Ok(outcome));
            }
        }
        Ok(outcomes) => {
            let err = Error::new(
                ErrorKind::Backend,
                format!(
                    "the backend answered {} renewals for {}",
                    outcomes.len(),
                    batch.len()
                ),
            );
            for request in batch {
                let _ = request.reply.send(Err(err.clone()));
            }
        }
        Err(err) => {
            for request in batch {
                let _ = request.reply.send(Err(err.clone()));
            }
        }
    }
}
