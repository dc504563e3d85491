//! Calls on every master at once (or on some), each bounded by a timeout: the fan-out every
//! RedLock operation is made of.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use distlock_core::Result;
use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;

use super::backend::RedlockBackend;
use super::connect::Master;
use crate::redis::RedisBackend;

/// What the masters answered to one operation, in master order; `None` where a master did
/// not answer in time or failed.
pub(super) type Answers<T> = Vec<Option<T>>;

impl RedlockBackend {
    /// Runs `op` on every master at once, each bounded by `timeout`.
    pub(super) async fn on_all<'a, T, F, Fut>(&'a self, timeout: Duration, op: F) -> Answers<T>
    where
        F: Fn(&'a RedisBackend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let every: Vec<usize> = (0..self.masters.len()).collect();
        self.on_these(&every, timeout, op).await
    }

    /// Runs `op` on the masters at positions `these` at once, each bounded by `timeout`;
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
        let calls = these.iter().map(|&at| {
            let (op, master) = (&op, &self.masters[at]);
            bounded(timeout, async move { op(master.ready()?).await })
        });
        join_all(calls).await
    }

    /// Runs `op` on every master at once, each bounded by `timeout`, until the answers so
    /// far are `enough`; the calls still running then finish in the background, each
    /// answer handed to `late` with its master (and counted until it ends, for
    /// [`settle`](distlock_core::backend::Backend::settle)).
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
        let mut calls: FuturesUnordered<_> = self
            .masters
            .iter()
            .enumerate()
            .map(|(at, master)| {
                let call = bounded(timeout, op(master.clone()));
                async move { (at, call.await) }
            })
            .collect();
        let mut answers: Answers<T> = self.masters.iter().map(|_| None).collect();
        while let Some((at, answer)) = calls.next().await {
            answers[at] = answer;
            if enough(&answers) {
                break;
            }
        }
        if !calls.is_empty() {
            let masters = self.masters.clone();
            let tail = self.tails.start();
            tokio::spawn(async move {
                let _tail = tail;
                while let Some((at, answer)) = calls.next().await {
                    if let Some(value) = answer {
                        late(masters[at].clone(), value).await;
                    }
                }
            });
        }
        answers
    }
}

/// One master's answer to `call` within `timeout`; `None` (logged) if it failed or was
/// late.
async fn bounded<T>(timeout: Duration, call: impl Future<Output = Result<T>>) -> Option<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "a RedLock master failed");
            None
        }
        Err(_) => {
            tracing::debug!(?timeout, "a RedLock master did not answer in time");
            None
        }
    }
}
