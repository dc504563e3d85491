//! The calls a RedLock operation leaves running once a majority answered (its slower
//! masters'), counted so that `Client::settle` and `Client::close` can wait for them: a
//! release's call to the last master, dropped with a program that exits, would leave that
//! master holding the lock until its lease ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How many tails run, and a wake-up for when the last ends.
#[derive(Debug, Default)]
pub(super) struct Tails {
    running: AtomicUsize,
    ended: Notify,
}

/// One tail running: dropped when it ends.
pub(super) struct Tail(Arc<Tails>);

impl Tails {
    /// Counts a tail until the answer is dropped.
    pub(super) fn start(self: &Arc<Self>) -> Tail {
        self.running.fetch_add(1, Ordering::SeqCst);
        Tail(self.clone())
    }

    /// Waits, at most `within`, until no tail runs; true if none does.
    pub(super) async fn settle(&self, within: Duration) -> bool {
        let none_left = async {
            loop {
                let ended = self.ended.notified();
                if self.running.load(Ordering::SeqCst) == 0 {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(within, none_left).await.is_ok()
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settles_once_every_tail_ended() {
        let tails = Arc::new(Tails::default());
        assert!(tails.settle(Duration::from_millis(10)).await);
        let tail = tails.start();
        assert!(!tails.settle(Duration::from_millis(10)).await);
        let ending = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(tail);
        });
        assert!(tails.settle(Duration::from_secs(5)).await);
        ending.await.unwrap();
    }
}
