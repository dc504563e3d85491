//! Calls on every master at once (or on some), all bounded by one deadline: the fan-out
//! every RedLock operation is made of.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use distlock_core::Result;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::backend::RedlockBackend;
use super::connect::Master;
use crate::redis::RedisBackend;

/// What the masters answered to one operation, in master order; `None` where a master did
/// not answer in time or failed.
pub(super) type Answers<T> = Vec<Option<T>>;

impl RedlockBackend {
    /// Runs `op` on every master at once, all bounded by `timeout`.
    pub(super) async fn on_all<'a, T, F, Fut>(&'a self, timeout: Duration, op: F) -> Answers<T>
    where
        F: Fn(&'a RedisBackend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let every: Vec<usize> = (0..self.masters.len()).collect();
        self.on_these(&every, timeout, op).await
    }

    /// Runs `op` on the masters at positions `these` at once, all bounded by `timeout`;
    /// the answers are in the order of `these`.
    pub(super) async fn on_these<'a, T, F, Fut>(
        &'a self,
        these: &[usize],
        timeout: Duration,
        op: F,
    ) -> Answers<T>
    where
        F: Fn(&'a RedisBackend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let mut calls: FuturesUnordered<_> = these
            .iter()
            .enumerate()
            .map(|(place, &at)| {
                let (op, master) = (&op, &self.masters[at]);
                async move { (place, async { op(master.ready()?).await }.await) }
            })
            .collect();
        let mut answers: Answers<T> = these.iter().map(|_| None).collect();
        let deadline = Instant::now() + timeout;
        if !gather(&mut calls, &mut answers, deadline, |_| false).await {
            let unanswered = positions_of(&answers, Option::is_none).map(|place| these[place]);
            log_late(&self.masters, unanswered, timeout);
        }
        answers
    }

    /// Runs `op` on every master at once, all bounded by `timeout`, until the answers so
    /// far are `enough`; the calls still running then finish in the background (within
    /// the same bound), each answer handed to `late` with its master (and counted until it
    /// ends, for [`settle`](distlock_core::backend::Backend::settle)).
    pub(super) async fn on_all_until<T, F, Fut, L, LateFut>(
        &self,
        timeout: Duration,
        op: F,
        enough: impl Fn(&Answers<T>) -> bool,
        late: L,
    ) -> Answers<T>
    where
        T: Send + 'static,
        F: Fn(Arc<Master>) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
        L: Fn(Arc<Master>, T) -> LateFut + Send + 'static,
        LateFut: Future<Output = ()> + Send,
    {
        let deadline = Instant::now() + timeout;
        let mut calls: FuturesUnordered<_> = self
            .masters
            .iter()
            .enumerate()
            .map(|(at, master)| {
                // Boxed: a master's call is a large future, moved into the set whole.
                let call = Box::pin(op(master.clone()));
                async move { (at, call.await) }
            })
            .collect();
        let mut answers: Answers<T> = self.masters.iter().map(|_| None).collect();
        if !gather(&mut calls, &mut answers, deadline, enough).await {
            log_late(
                &self.masters,
                positions_of(&answers, Option::is_none),
                timeout,
            );
        }
        if !calls.is_empty() && Instant::now() < deadline {
            let masters = self.masters.clone();
            let tail = self.tails.start();
            // The masters without an answer so far: still running, or failed (which their
            // failure logged).
            let mut running: Vec<bool> = answers.iter().map(Option::is_none).collect();
            tokio::spawn(async move {
                let _tail = tail;
                let (still, masters) = (&mut running, &masters);
                let rest = async move {
                    while let Some((at, answer)) = calls.next().await {
                        still[at] = false;
                        if let Some(value) = answered(answer) {
                            late(masters[at].clone(), value).await;
                        }
                    }
                };
                if tokio::time::timeout_at(deadline, rest).await.is_err() {
                    log_late(masters, positions_of(&running, |still| *still), timeout);
                }
            });
        }
        answers
    }
}

/// Puts the answers of `calls` (each with its place in `answers`) in place until they are
/// `enough`, every call answered, or `deadline`; calls left unanswered stay in `calls`.
/// False where the deadline came first.
async fn gather<T, C>(
    calls: &mut FuturesUnordered<C>,
    answers: &mut Answers<T>,
    deadline: Instant,
    enough: impl Fn(&Answers<T>) -> bool,
) -> bool
where
    C: Future<Output = (usize, Result<T>)>,
{
    let answering = async {
        while let Some((place, answer)) = calls.next().await {
            answers[place] = answered(answer);
            if enough(answers) {
                break;
            }
        }
    };
    // One timer for the whole fan-out, not one per master.
    tokio::time::timeout_at(deadline, answering).await.is_ok()
}

/// The positions in `items` of those that are `wanted`.
fn positions_of<T>(items: &[T], wanted: impl Fn(&T) -> bool) -> impl Iterator<Item = usize> {
    let wanted: Vec<usize> = (0..items.len()).filter(|&at| wanted(&items[at])).collect();
    wanted.into_iter()
}

/// Logs (debug) that the `masters` at `positions` had not answered (or had failed, which
/// their failures log) by a fan-out's deadline.
fn log_late(masters: &[Arc<Master>], positions: impl Iterator<Item = usize>, timeout: Duration) {
    let late: Vec<String> = positions.map(|at| masters[at].label()).collect();
    tracing::debug!(masters = ?late, ?timeout, "RedLock masters did not answer in time");
}

/// A master's answer; `None` (logged) if it failed.
fn answered<T>(answer: Result<T>) -> Option<T> {
    answer
        .inspect_err(|err| tracing::debug!(error = %err, "a RedLock master failed"))
        .ok()
}
